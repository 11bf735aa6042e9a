"""Forces on displaced supercells, saved as they finish so that an interrupted run resumes.

Phonon (phonopy) and thermal-conductivity (phono3py) workflows evaluate forces on hundreds to
thousands of displaced supercells. :func:`displacement_forces` evaluates them one by one, writes
each result atomically to ``cache_dir/forces_<k>.npy`` as soon as it is known, and on a rerun loads
the finished ones instead of recomputing them. ``cache_dir/manifest.json`` fingerprints the set of
structures (species, cells, positions): a cache made for other structures is refused, never mixed in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
from ase import Atoms

from mlip.io import atomic_write
from mlip.workflows.fingerprints import structures_fingerprint


def _load_forces(path: Path, n_atoms: int) -> Optional[np.ndarray]:
    """Forces saved at ``path``, or None when the file is missing or unreadable/inconsistent."""
    if not path.exists():
        return None
    try:
        forces = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if forces.shape != (n_atoms, 3) or not np.all(np.isfinite(forces)):
        return None
    return forces


def displacement_forces(
    structures: Sequence[Atoms],
    calculator,
    cache_dir: Union[str, Path, None] = None,
    label: str = "forces",
    progress: bool = True,
) -> List[np.ndarray]:
    """Forces [n_atoms, 3] (eV/Å) on each structure, resumable through ``cache_dir``.

    Args:
        structures: the displaced supercells (ASE Atoms).
        calculator: an ASE calculator (used for every structure).
        cache_dir: folder for the per-structure results; ``None`` keeps nothing on disk.
        label: name of this set (``"fc2"``, ``"fc3"``, ...), used for the progress bar.
        progress: show a tqdm progress bar.

    Raises:
        ValueError: ``cache_dir`` holds results for a different set of structures.
        RuntimeError: a calculator returned non-finite forces (the structure's index is named).
    """
    structures = list(structures)
    cache = Path(cache_dir) if cache_dir is not None else None
    fingerprint = structures_fingerprint(structures)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        manifest_path = cache / "manifest.json"
        manifest = {"label": label, "n_structures": len(structures), "fingerprint": fingerprint}
        if manifest_path.exists():
            try:
                old = json.loads(manifest_path.read_text())
            except (OSError, ValueError):
                old = None
            if not isinstance(old, dict) or old.get("fingerprint") != fingerprint:
                raise ValueError(
                    f"{cache} holds displacement forces for different structures (other supercell, "
                    f"displacement or input structure); use another output folder or delete it"
                )
        else:
            atomic_write(manifest_path, lambda tmp: Path(tmp).write_text(json.dumps(manifest, indent=1)))

    results: List[Optional[np.ndarray]] = [None] * len(structures)
    todo = []
    for k, atoms in enumerate(structures):
        if cache is not None:
            results[k] = _load_forces(cache / f"forces_{k:05d}.npy", len(atoms))
        if results[k] is None:
            todo.append(k)

    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        done = len(structures) - len(todo)
        bar = tqdm(total=len(structures), initial=done, desc=f"{label} forces", unit="supercell",
                   dynamic_ncols=True)
    try:
        for k in todo:
            atoms = structures[k].copy()
            atoms.calc = calculator
            forces = np.array(atoms.get_forces(), dtype=float)
            if not np.all(np.isfinite(forces)):
                raise RuntimeError(f"non-finite forces on displaced supercell {k} of {label}")
            results[k] = forces
            if cache is not None:
                atomic_write(cache / f"forces_{k:05d}.npy", lambda tmp, f=forces: _save_npy(tmp, f))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results  # type: ignore[return-value]


def subtract_residual_forces(forces: Sequence[np.ndarray], supercell: Atoms, calculator,
                             cache_dir: Union[str, Path, None] = None) -> Tuple[List[np.ndarray], float]:
    """The displaced supercells' forces minus the forces on the undisplaced ``supercell`` (phonopy's
    ``--fz``); returns (the corrected forces, the largest residual force norm in eV/Å).

    Finite-displacement force constants read F(u)/u as the derivative of the forces, which assumes
    that the undisplaced supercell carries no forces. An exactly invariant model in a symmetric crystal
    gives none; a model invariant only approximately (or a structure held by a symmetry constraint
    away from the model's own minimum) leaves residual forces F₀, whose error F₀/u is 100 × F₀ per Å at
    u = 0.01 Å. (F(u) − F₀)/u has no such error. One more evaluation, cached in ``cache_dir`` like the
    displaced ones (:func:`displacement_forces`); ``None`` entries of ``forces`` (displacements not
    computed) stay ``None``.
    """
    residual = displacement_forces([supercell], calculator, cache_dir=cache_dir, label="perfect supercell",
                                   progress=False)[0]
    corrected = [None if f is None else np.asarray(f, dtype=float) - residual for f in forces]
    return corrected, float(np.linalg.norm(residual, axis=1).max(initial=0.0))


def _save_npy(path: str, array: np.ndarray) -> None:
    with open(path, "wb") as fh:
        np.save(fh, array, allow_pickle=False)


__all__ = ["displacement_forces", "subtract_residual_forces"]
