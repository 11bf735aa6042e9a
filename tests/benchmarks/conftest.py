"""The benchmark script a test module is about, loaded as a module (``script`` fixture).

A test module names its script with ``SCRIPT`` (a path under ``benchmarks/``); its tests are skipped
where ``benchmarks/`` is not beside the tests (tests run from an installed package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlip.testing.scripts import script_module


@pytest.fixture(scope="module")
def script(request):
    path = Path(request.module.SCRIPT)
    if not path.is_file():
        pytest.skip("benchmarks/ is not beside the tests (installed tests)")
    with script_module(path) as module:
        yield module
