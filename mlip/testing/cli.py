"""Running the ``mlip`` command line inside a test."""

from __future__ import annotations

from typing import Tuple


def run_cli(capsys, *argv) -> Tuple[int, str, str]:
    """Run ``mlip ARGV...`` in this process (``capsys``: pytest's fixture); returns (exit status,
    stdout, stderr)."""
    from mlip.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
