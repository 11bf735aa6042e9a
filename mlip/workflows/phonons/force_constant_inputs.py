"""Arguments the finite-displacement workflows share: the crystal and a float64 calculator.

:func:`mlip.workflows.phonons.harmonic.run_phonons` and :func:`mlip.workflows.phonons.kappa.run_kappa`
check these before anything is computed, so that a bad argument never costs a relaxation or a force call.
"""

from __future__ import annotations

import warnings

import numpy as np
from ase import Atoms

#: dtypes of mlip calculators too coarse for finite displacements
_LOW_PRECISION = ("torch.float32", "torch.float16", "torch.bfloat16")


def check_crystal(atoms, *, workflow: str) -> None:
    """ValueError unless ``atoms`` is a non-empty ASE crystal periodic in all three directions with a
    non-degenerate cell. ``workflow`` names the workflow in the message about periodicity
    (``"the phonon workflow"``). The settings are checked by
    :mod:`mlip.workflows.phonons.settings`."""
    if not isinstance(atoms, Atoms):
        raise ValueError(f"atoms must be an ase.Atoms crystal, got {type(atoms).__name__}")
    if len(atoms) == 0:
        raise ValueError("the structure has no atoms")
    if not np.all(atoms.pbc):
        raise ValueError(
            f"{workflow} needs a crystal periodic in all three directions, got pbc={atoms.pbc.tolist()} "
            "(molecules, slabs and wires are not supported)"
        )
    if atoms.cell.rank < 3 or abs(atoms.cell.volume) < 1e-8:
        raise ValueError(f"the structure's cell is degenerate (volume {abs(atoms.cell.volume):.3g} Å³)")


def float64_calculator(calculator, stacklevel: int = 3):
    """The ASE calculator for ``calculator`` (anything
    :func:`mlip.calculators.model_loading.resolve_calculator` accepts), mlip potentials in float64.

    An mlip calculator passed in lower precision is used as it is, with a ``RuntimeWarning``:
    forces from displacements of a few hundredths of an Å drown in float32 round-off.
    ``stacklevel`` 3 points the warning at the caller of the workflow function calling this."""
    from mlip.calculators.model_loading import resolve_calculator

    calc = resolve_calculator(calculator, dtype="float64")
    dtype = str(getattr(calc, "dtype", ""))
    if dtype in _LOW_PRECISION:
        warnings.warn(
            f"the calculator evaluates in {dtype.replace('torch.', '')}: finite-displacement force "
            "constants need float64 (forces from displacements of a few hundredths of an Å drown in "
            "round-off); pass the model name, checkpoint or Potential instead (resolved in float64) or "
            "MLIPCalculator(dtype='float64')",
            RuntimeWarning, stacklevel=stacklevel,
        )
    return calc


__all__ = ["check_crystal", "float64_calculator"]
