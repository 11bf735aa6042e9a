"""Geometry optimisation: FIRE, with the cell relaxed through ``FrechetCellFilter`` for bulk crystals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Optional, Sequence, Union

import numpy as np
from ase import Atoms
from ase.optimize import FIRE

from mlip.extras import require


@dataclass
class RelaxResult:
    """Outcome of :func:`relax`.

    Attributes:
        atoms: the relaxed structure (a copy of the input, with the calculator attached).
        energy: potential energy of the relaxed structure (eV).
        converged: whether the largest force (and, with the cell filter, the largest scaled
            stress component) dropped below ``fmax`` within ``steps``.
        n_steps: optimiser steps taken.
        fmax_final: largest force norm at the end (eV/Å; includes the cell-filter components).
    """

    atoms: Atoms
    energy: float
    converged: bool
    n_steps: int
    fmax_final: float
    spacegroup_initial: Optional[str] = None
    spacegroup_final: Optional[str] = None

    @property
    def symmetry_broken(self) -> bool:
        """True when the space group changed during a symmetry-preserving relaxation."""
        return (self.spacegroup_initial is not None and self.spacegroup_final is not None
                and self.spacegroup_initial != self.spacegroup_final)


def spacegroup(atoms: Atoms, symprec: float = 1e-5) -> str:
    """International symbol and number of the space group, e.g. ``"Fm-3m (225)"`` (needs spglib)."""
    spglib = require("spglib", "phonons", "symmetry analysis")
    cell = (atoms.cell.array, atoms.get_scaled_positions(), atoms.numbers)
    symbol = spglib.get_spacegroup(cell, symprec=symprec)
    if symbol is None:
        raise ValueError(f"spglib could not determine the space group (symprec={symprec})")
    return symbol


def _max_force(gradient: np.ndarray) -> float:
    g = np.asarray(gradient, dtype=float).reshape(-1, 3)
    return float(np.sqrt((g**2).sum(axis=1)).max()) if len(g) else 0.0


def relax(
    atoms: Atoms,
    calculator,
    fmax: float = 0.05,
    steps: int = 500,
    cell_filter: bool = True,
    trajectory: Optional[str] = None,
    logfile: Union[str, IO, None] = None,
    progress: bool = True,
    fix_symmetry: bool = False,
    symprec: float = 0.01,
    cell_mask: Optional[Sequence[bool]] = None,
    spacegroup_symprec: float = 1e-5,
) -> RelaxResult:
    """Relax ``atoms`` with ASE's FIRE optimiser.

    Bulk structures (periodic in all three directions) relax positions *and* cell through
    :class:`ase.filters.FrechetCellFilter` when ``cell_filter`` is true (the Matbench Discovery
    protocol: FIRE + FrechetCellFilter, fmax 0.05 eV/Å, ≤ 500 steps). Slabs (``pbc=[T, T, F]``),
    wires and molecules (no periodicity) have no well-defined stress to relax, so only the atomic
    positions are optimised with plain FIRE; the same happens for bulk with ``cell_filter=False``.
    Constraints on ``atoms`` (e.g. ``FixAtoms`` on the bottom layers of a slab) are honoured.

    The input is not modified: a copy is relaxed and returned in the result.

    Args:
        atoms: the structure.
        calculator: an ASE calculator, or anything :func:`mlip.workflows.resolve_calculator`
            accepts (shipped model name, checkpoint path, ``"module:Class"``, ``Potential``).
            Geometry optimisation is best done in float64 (``dtype="float64"``).
        fmax: force convergence threshold (eV/Å).
        steps: maximum number of optimiser steps.
        cell_filter: relax the cell too (bulk only, see above).
        trajectory: optional path of an ASE ``.traj`` file receiving every step.
        logfile: optional path or file object for the optimiser's text log (``"-"`` for stdout).
        progress: show a tqdm progress bar of steps with the current fmax.
        fix_symmetry: keep the space group found with ``symprec`` (ASE ``FixSymmetry`` on
            positions and cell; needs spglib). The result then carries the space group before and
            after, determined with ``spacegroup_symprec``, and ``symmetry_broken``.
        symprec: tolerance of the symmetry that ``FixSymmetry`` imposes.
        cell_mask: six booleans (xx, yy, zz, yz, xz, xy) of the strain components the cell filter
            may relax; ``[1, 1, 1, 0, 0, 0]`` relaxes without shear (the phonon protocol).
        spacegroup_symprec: tolerance for the before/after space-group comparison.

    Exceptions raised by the calculator (invalid input, out of memory, ...) propagate at once:
    the optimisation never continues after a failed force call. Non-finite forces raise
    ``RuntimeError``.
    """
    from mlip.calculators.model_loading import resolve_calculator

    if fmax <= 0:
        raise ValueError(f"fmax must be positive, got {fmax}")
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    calc = resolve_calculator(calculator, dtype="float64")
    atoms = atoms.copy()
    atoms.calc = calc
    sg_initial = None
    if fix_symmetry:
        from ase.constraints import FixSymmetry

        sg_initial = spacegroup(atoms, spacegroup_symprec)
        atoms.set_constraint([FixSymmetry(atoms, symprec=symprec)] + list(atoms.constraints))

    use_filter = bool(cell_filter) and bool(np.all(atoms.pbc))
    if use_filter:
        from ase.filters import FrechetCellFilter

        mask = None
        if cell_mask is not None:
            mask = [bool(m) for m in cell_mask]
            if len(mask) != 6:
                raise ValueError(f"cell_mask needs 6 entries (xx, yy, zz, yz, xz, xy), got {len(mask)}")
        target = FrechetCellFilter(atoms, mask=mask)
    else:
        target = atoms
    opt = FIRE(target, logfile=logfile, trajectory=trajectory)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, desc="relax", unit="step", leave=False, dynamic_ncols=True)
    converged = False
    current = float("nan")
    try:
        for converged in opt.irun(fmax=fmax, steps=steps):
            current = _max_force(opt.optimizable.get_gradient())
            if not np.isfinite(current):
                raise RuntimeError(f"non-finite forces at relaxation step {opt.nsteps}; stopping")
            if bar is not None:
                bar.update(opt.nsteps - bar.n)
                bar.set_postfix(fmax=f"{current:.4f}", refresh=False)
    finally:
        if bar is not None:
            bar.close()
        # Close the trajectory/log files the optimiser opened (ASE >= 3.23 dynamics are IOContexts).
        close = getattr(opt, "close", None)
        if callable(close):
            close()
    energy = float(atoms.get_potential_energy())
    sg_final = None
    if fix_symmetry:
        sg_final = spacegroup(atoms, spacegroup_symprec)
        # The result is a plain relaxed structure: drop the symmetry constraint we added.
        atoms.set_constraint([c for c in atoms.constraints if type(c).__name__ != "FixSymmetry"])
    return RelaxResult(
        atoms=atoms,
        energy=energy,
        converged=bool(converged),
        n_steps=int(opt.nsteps),
        fmax_final=current,
        spacegroup_initial=sg_initial,
        spacegroup_final=sg_final,
    )


__all__ = ["RelaxResult", "relax", "spacegroup"]
