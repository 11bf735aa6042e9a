"""The resumable cache folder of the phonon and κ workflows: whose forces it holds, and the relaxed cell.

:func:`mlip.workflows.phonons.harmonic.run_phonons` and :func:`mlip.workflows.phonons.kappa.run_kappa` keep a
``cache/`` folder in their ``out_dir`` so that a killed run resumes without recomputing anything:

* ``model.json``: the model that made the cache (:func:`model_fingerprint`);
  :func:`check_model_cache` refuses a folder made by another model, so that forces of two models
  are never mixed;
* ``relaxed_structure.json``: the symmetry-preserving relaxation (:func:`cached_relaxation`),
  reused when the input structure and the relaxation settings match;
* ``fc2/``, ``fc3/``: forces of the displaced supercells
  (:func:`mlip.workflows.phonons.displacement_forces.displacement_forces`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional, Sequence

from ase import Atoms

from mlip.io import atoms_from_dict, atoms_to_dict, jsonable, read_json, write_json
from mlip.workflows.fingerprints import model_fingerprint, structures_fingerprint

MODEL_NAME = "model.json"
RELAXED_NAME = "relaxed_structure.json"

#: strain mask (xx, yy, zz, yz, xz, xy) of a cell relaxed without shear
NO_SHEAR_CELL_MASK = (1, 1, 1, 0, 0, 0)

#: the summary of a relaxation kept in the cache (and in ``PhononResult.relaxation``)
RELAXATION_KEYS = ("converged", "n_steps", "energy_eV", "fmax_final_eV_per_A", "spacegroup_initial",
                   "spacegroup_final", "symmetry_broken")


def check_model_cache(cache: Path, calc) -> None:
    """Refuse the cache folder ``cache`` when ``model.json`` names another model than ``calc``
    (ValueError: "... use another output folder or delete it"); record ``calc`` there when the
    folder has no model yet."""
    from mlip.calculators.model_loading import describe_model

    path = Path(cache) / MODEL_NAME
    fingerprint = model_fingerprint(calc)
    old = read_json(path) if path.exists() else None
    if old is not None and old.get("fingerprint") != fingerprint:
        raise ValueError(
            f"{cache} holds results of another model ({old.get('model')!r}, fingerprint "
            f"{old.get('fingerprint')}) than this run's ({describe_model(calc)!r}, {fingerprint}); "
            "use another output folder or delete it"
        )
    if old is None:
        write_json(path, {"model": describe_model(calc), "fingerprint": fingerprint})


class Relaxation(NamedTuple):
    """Outcome of :func:`cached_relaxation`."""

    #: the relaxed cell (no calculator, no constraints)
    atoms: Atoms
    #: ``converged``, ``n_steps``, ``energy_eV`` (eV), ``fmax_final_eV_per_A`` (eV/Å),
    #: ``spacegroup_initial``, ``spacegroup_final`` (e.g. ``"Fm-3m (225)"``), ``symmetry_broken``
    info: dict
    #: True when it was read from the cache rather than computed now
    reused: bool


def cached_relaxation(atoms: Atoms, calc, cache: Optional[Path], *, fmax: float, steps: int,
                      symprec: float, fix_symmetry_symprec: float, cell_mask: Optional[Sequence[int]],
                      key_extra: Mapping[str, Any], progress: bool) -> Relaxation:
    """Symmetry-preserving relaxation of ``atoms`` (FIRE + ``FrechetCellFilter`` with
    ``FixSymmetry``, see :func:`mlip.workflows.relax.relax`), reused from
    ``cache/relaxed_structure.json`` when the input structure and the settings match.

    Args:
        atoms: the unit cell (not modified).
        calc: the ASE calculator.
        cache: the cache folder, or None to keep nothing.
        fmax: force threshold (eV/Å); steps: the most FIRE steps.
        symprec: tolerance (Å) of the space groups reported before and after.
        fix_symmetry_symprec: tolerance (Å) of the symmetry ``FixSymmetry`` imposes.
        cell_mask: strain mask of the cell filter (``[1, 1, 1, 0, 0, 0]``: no shear), None: all.
        key_extra: further entries of the cache key, how the calling workflow records the cell
            mask (phonons ``{"no_shear": ...}``, κ ``{"cell_mask": [...]}``).
        progress: progress bar.

    The structure is written to and read back from the cache (when there is one) before it is
    returned, so that a first run and a resumed run use bit-identical numbers.
    """
    from mlip.workflows.relax import relax as relax_structure

    key = jsonable({
        "input": structures_fingerprint([atoms]),
        "fmax": float(fmax), "steps": int(steps), "fix_symmetry_symprec": float(fix_symmetry_symprec),
        "symprec": float(symprec), **key_extra,
    })
    path = Path(cache) / RELAXED_NAME if cache is not None else None
    if path is not None and path.exists():
        saved = read_json(path)
        if saved is not None and saved.get("key") == key:
            try:
                return Relaxation(atoms_from_dict(saved["structure"]), _saved_info(saved["relaxation"]), True)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # unreadable: relax again
    result = relax_structure(
        atoms, calc, fmax=fmax, steps=steps, cell_filter=True, progress=progress, fix_symmetry=True,
        symprec=fix_symmetry_symprec, cell_mask=None if cell_mask is None else list(cell_mask),
        spacegroup_symprec=symprec,
    )
    relaxed = result.atoms.copy()
    relaxed.calc = None
    relaxed.set_constraint()
    info = {
        "converged": bool(result.converged),
        "n_steps": int(result.n_steps),
        "energy_eV": float(result.energy),
        "fmax_final_eV_per_A": float(result.fmax_final),
        "spacegroup_initial": result.spacegroup_initial,
        "spacegroup_final": result.spacegroup_final,
        "symmetry_broken": bool(result.symmetry_broken),
    }
    if path is not None:
        write_json(path, {"key": key, "structure": atoms_to_dict(relaxed), "relaxation": info})
        relaxed = atoms_from_dict(read_json(path)["structure"])
    return Relaxation(relaxed, info, False)


def _saved_info(saved: dict) -> dict:
    """The relaxation summary stored in a cache file; KeyError when something is missing."""
    info = dict(saved)
    missing = [k for k in RELAXATION_KEYS if k not in info]
    if missing:
        raise KeyError(missing[0])
    return info


__all__ = [
    "MODEL_NAME",
    "NO_SHEAR_CELL_MASK",
    "RELAXED_NAME",
    "Relaxation",
    "cached_relaxation",
    "check_model_cache",
]
