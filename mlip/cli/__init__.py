"""The ``mlip`` command line: inspect and create checkpoints, relax structures, run MD.

    mlip info default
    mlip create platonic --species Cu Au --cutoff 4.5 --seed 0 -o cuau.safetensors
    mlip create --config models/configs/equiformer_v3_mp.yaml -o eqv3-mp.safetensors
    mlip relax structure.cif --model default --fmax 0.05
    mlip md structure.cif --model default --ensemble nve --temperature 300 --steps 1000 --supercell 3 3 3
    mlip discovery relax initial-structures.json.gz --model default --out-dir run   (mlip.cli.discovery)

``--model`` accepts a shipped model's name, a checkpoint path or the import path of an ASE
calculator class (``ase.calculators.emt:EMT``). Bad input (unreadable file, unknown element, NaN
coordinates, unknown model, ...) and a missing optional extra print ``mlip: error: <message>`` and exit
with status 2; a simulation that fails at run time exits with status 1; ``mlip relax`` exits with status 3
(``EXIT_NOT_CONVERGED``) when the relaxation did not converge, after writing its result. An OS error is
one line too, ``mlip: error: PATH: REASON``, with status 1 when the machine ran out of something (disk
full, quota, file size limit, I/O error) and 2 otherwise (permission denied, a read-only folder, a file
where a folder should be). A command that writes a folder holds its run lock (:mod:`mlip.run_lock`,
through :func:`mlip.cli.common.lock_output_folder`) until it ends. Set ``MLIP_DEBUG=1`` for tracebacks.

One module per subcommand (:mod:`mlip.cli.md`, :mod:`mlip.cli.relax`, ...), each with
``add_parser(subparsers)`` and ``run(args)``; :mod:`mlip.cli.common` and :mod:`mlip.cli.arguments`
hold what they share.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from mlip.cli.common import EXIT_NOT_CONVERGED, PROG, CLIError, end_command, os_error_message, start_command

#: exit status when the reader of stdout stopped early (``mlip info … | head -1``): quiet, with the
#: status of a Unix tool ended by SIGPIPE (128 + 13), which ``set -o pipefail`` sees as such tools
EXIT_BROKEN_PIPE = 141

# The subcommands in the order ``mlip --help`` lists them.
SUBCOMMANDS = ("info", "create", "phonons", "kappa", "data", "train", "distill", "learn", "eval", "card",
               "relax", "md", "discovery")


class _Parser(argparse.ArgumentParser):
    """Usage errors read ``mlip: error: ...`` for every subcommand, like all other input errors."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``mlip`` parser: each subcommand module adds its own subparser (``add_parser``)."""
    import importlib

    from mlip.version import __version__

    parser = _Parser(
        prog=PROG,
        description="Machine-learning interatomic potentials: inspect/create checkpoints, relax, run MD.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"mlip.cli.{name}").add_parser(sub)
    return parser


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (``| head``); if so stdout is pointed at /dev/null,
    so that nothing more written there (the interpreter's final flush included) fails again."""
    import select

    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        closed = any(flags & select.POLLERR for _, flags in poll.poll(0))  # a pipe without reader
    except (AttributeError, OSError, ValueError):  # stdout replaced (tests) or not a file
        return False
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    return closed


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``mlip`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help/--version (0) or a usage error (2, already printed)
        return int(exit_.code or 0)
    args.argv = argv

    from ase.calculators.calculator import PropertyNotImplementedError

    from mlip.extras import MissingExtraError

    threads = getattr(args, "threads", None)
    if threads is None and hasattr(args, "threads"):  # the command runs torch: threads that behave
        from mlip.threads import default_threads

        threads = default_threads()
    debug = os.environ.get("MLIP_DEBUG", "") not in ("", "0")
    previous_threads = None
    start_command(argv)
    try:
        if threads is not None:
            import torch

            previous_threads = torch.get_num_threads()
            torch.set_num_threads(threads)
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader of stdout that stopped early shows here, not at the interpreter's exit
        return status
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # permission denied, disk full, a file where a folder should be, ...
        if isinstance(err, BrokenPipeError) and _stdout_closed():
            return EXIT_BROKEN_PIPE  # the reader stopped (``mlip info … | head -1``): not an error
        if debug:
            raise
        msg, status = os_error_message(err)
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return status
    except (CLIError, ValueError, PropertyNotImplementedError, MissingExtraError) as err:
        if debug:
            raise
        print(f"{PROG}: error: {str(err) or type(err).__name__}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        if debug:
            raise
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    finally:
        end_command()  # the run locks of its output folders
        if previous_threads is not None:  # main() may run inside a larger program (tests)
            import torch

            torch.set_num_threads(previous_threads)


__all__ = ["CLIError", "EXIT_BROKEN_PIPE", "EXIT_NOT_CONVERGED", "PROG", "build_parser", "main"]
