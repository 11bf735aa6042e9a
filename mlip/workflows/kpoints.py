"""Brillouin-zone sampling of first-principles labels: Monkhorst–Pack meshes from a k-point density, and
what a finished calculation says about the structure's metallicity.

A mesh follows the cell: n_i = ⌈density · |b_i|⌉ along each periodic direction (b_i the reciprocal
lattice vectors with 2π, in Å⁻¹), one k-point along a direction without periodicity. A semiconductor's
energy converges quickly with the mesh; a metal's, whose occupations change across the Fermi surface,
needs a much denser one (``docs/data.md`` has the measured study). :func:`band_edges` tells the two apart
on a finished calculation: a band that crosses the Fermi level between k-points, or a gap below a
threshold, marks a metal, which the labeller can then label again on its denser mesh.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Tuple

import numpy as np


def kpoint_mesh(atoms, density: float, even: bool = False) -> Tuple[int, int, int]:
    """Monkhorst–Pack sizes n_i = ⌈density · |b_i|⌉ along the periodic directions (b_i the reciprocal
    lattice vectors including 2π, in Å⁻¹; ``density`` in points per Å⁻¹), 1 along the others. ``even``
    rounds each periodic size up to an even number (a Monkhorst–Pack mesh that is not Γ-centred then
    leaves Γ out: a shifted mesh)."""
    if density <= 0:
        raise ValueError(f"k-point density must be positive, got {density}")
    sizes = []
    if atoms.cell.rank == 3:
        reciprocal = 2 * math.pi * np.linalg.inv(np.asarray(atoms.cell.array, dtype=float)).T
    for axis in range(3):
        if not atoms.pbc[axis]:
            sizes.append(1)
            continue
        if atoms.cell.rank != 3:
            raise ValueError("a structure periodic along some direction needs a full 3-dimensional cell")
        n = max(1, math.ceil(density * float(np.linalg.norm(reciprocal[axis])) - 1e-9))
        sizes.append(n + n % 2 if even else n)
    return tuple(sizes)


def band_edges(calc) -> Dict[str, Any]:
    """The Fermi level (eV), the band gap (eV; 0 when a band crosses the Fermi level between k-points,
    i.e. a metal on this mesh), whether a band crosses, and the number of irreducible k-points of a
    finished calculation (any ASE calculator with eigenvalues: GPAW's, spin-unpolarised)."""
    fermi = float(calc.get_fermi_level())
    n_k = len(calc.get_ibz_k_points())
    eps = np.array([calc.get_eigenvalues(kpt=k) for k in range(n_k)])  # [k-points, bands]
    below, above = eps[eps <= fermi], eps[eps > fermi]
    crossing = bool(np.any((eps.min(axis=0) <= fermi) & (eps.max(axis=0) > fermi)))
    gap = 0.0 if crossing or not len(below) or not len(above) else float(above.min() - below.max())
    return {"fermi_level_eV": fermi, "gap_eV": gap, "band_crosses_fermi_level": crossing,
            "n_ibz_kpoints": n_k}


__all__ = ["band_edges", "kpoint_mesh"]
