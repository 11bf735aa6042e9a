"""GPAW labels that survive a kill: the self-consistent state written every few SCF steps, taken up again.

A plane-wave SCF of a 54-atom supercell on a converged k-point mesh runs for hours on two cores, longer
than the process that runs it may live; GPAW cannot go on from a half-finished SCF by itself, and the
labelling caches keep only finished labels. :func:`label_with_checkpoints` hooks GPAW's ``scf_step``:
every ``every_steps`` steps it writes the calculation, wave functions included (``mode="all"``, double
precision: single-precision wave functions are not orthonormal enough to go on from), to ``path``
(through a temporary file, so a kill while writing leaves the previous checkpoint whole). A later call
for the same structure reads it and goes on from there: GPAW restarts only its convergence test, so the
resumed SCF takes two or three steps more than the rest of an uninterrupted one would have, and its
labels agree with an uninterrupted run's within the SCF tolerance (checked in the tests). The recorded
wall time includes the time spent before the kill (``path`` + ``.json``: seconds and steps so far).
Both files are removed once the labels are in.

A checkpoint of a different structure (another cell, other atoms or positions) is not taken up: it is
replaced. Only GPAW's ASE interface of the new code (``gpaw.new``, the default of GPAW ≥ 24) has the
hook; any other calculator labels as :func:`mlip.workflows.labelling.label_atoms` does, without
checkpoints.

Size: the wave functions of every irreducible k-point, e.g. about 6 GB for 54 Ge atoms at 400 eV on a
6³ mesh; keep the folder out of version control (``*.gpw`` and ``*.gpw.json*`` are ignored).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, Tuple, Union

import numpy as np

#: SCF steps between two checkpoints
EVERY_STEPS = 3


def _same_structure(a, b) -> bool:
    return (len(a) == len(b) and bool(np.all(a.numbers == b.numbers)) and bool(np.all(a.pbc == b.pbc))
            and np.allclose(a.cell.array, b.cell.array, atol=1e-8, rtol=0)
            and np.allclose(a.positions, b.positions, atol=1e-8, rtol=0))


def _resume(path: Path, atoms):
    """The calculator of the checkpoint at ``path`` when it holds ``atoms``, else None."""
    from gpaw import GPAW

    if not path.is_file():
        return None
    try:
        calc = GPAW(str(path), txt=None)
    except Exception:  # a file of another GPAW version or a truncated one: start again
        return None
    if not hasattr(calc, "hooks") or not _same_structure(calc.atoms, atoms):
        return None
    calc.dft.results.clear()  # whatever the file holds is not converged: the SCF must go on
    return calc


def label_with_checkpoints(atoms, calculator, path: Union[str, Path],
                           label_atoms: Callable[[Any, Any], Dict[str, Any]],
                           every_steps: int = EVERY_STEPS) -> Tuple[Dict[str, Any], Any]:
    """(``label_atoms(atoms, calculator)``'s record, e.g.
    :func:`mlip.workflows.labelling.label_atoms`', of ``atoms`` by the GPAW ``calculator``, the
    calculator that finished it): the SCF written to ``path`` (a ``.gpw`` file) every ``every_steps``
    steps and resumed from it when a checkpoint of the same structure is there (the module docstring;
    the calculator returned is then the one read from it, with the converged state for whatever else is
    asked of it, such as the band gap). The record's ``wall_time_s`` must be there; it gains the time
    before a kill, as its ``cpu_time_s`` (where there) gains the CPU time before it. Under MPI every
    rank calls it."""
    if not hasattr(calculator, "hooks"):
        return label_atoms(atoms, calculator), calculator
    from gpaw.mpi import world

    from mlip.io import write_json

    path = Path(path)
    meta = path.with_name(path.name + ".json")
    part = path.with_name(path.stem + ".part.gpw")
    before, cpu_before, steps_before = 0.0, 0.0, 0
    resumed = _resume(path, atoms)
    if resumed is not None:
        calculator = resumed
        if meta.is_file():
            done = json.loads(meta.read_text())
            before, steps_before = float(done["seconds"]), int(done["steps"])
            cpu_before = float(done.get("cpu_seconds", 0.0))  # checkpoints before 2026-12-07 have none
    if world.rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
    world.barrier()
    t0, cpu0, steps = time.perf_counter(), time.process_time(), [0]

    def checkpoint(ctx) -> None:
        steps[0] += 1
        if steps[0] % every_steps:
            return
        calculator.write(str(part), mode="all")
        if world.rank == 0:
            os.replace(part, path)
            write_json(meta, {"seconds": before + time.perf_counter() - t0, "steps": steps_before + steps[0],
                              "cpu_seconds": cpu_before + time.process_time() - cpu0})
        world.barrier()

    calculator.hooks["scf_step"] = checkpoint
    try:
        record = label_atoms(atoms, calculator)
    finally:
        calculator.hooks.pop("scf_step", None)
    record["wall_time_s"] += before
    if "cpu_time_s" in record:
        record["cpu_time_s"] += cpu_before
    if resumed is not None:
        record["resumed_after_scf_steps"] = steps_before
    if world.rank == 0:
        for stale in (path, meta, part):
            stale.unlink(missing_ok=True)
    world.barrier()
    return record, calculator


__all__ = ["EVERY_STEPS", "label_with_checkpoints"]
