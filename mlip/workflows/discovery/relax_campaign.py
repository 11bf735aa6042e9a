"""Relax every material of a Matbench Discovery campaign: sharded, resumable, failures recorded.

Protocol (the benchmark's IS2RE-SR): ASE ``FIRE`` on ``FrechetCellFilter`` (positions and cell),
until the largest force (and scaled stress) is below ``fmax`` (default 0.02 eV/Å, as the top
models) or ``steps`` (default 500) steps are done; mlip models run in float64. The energy
reported is that of the last structure. With ``fix_symmetry`` (not the benchmark's protocol) ASE's
``FixSymmetry`` keeps each structure's space group, as DFT codes with symmetry switched on do: for a
model that is not exactly rotation invariant (the Platonic Transformer), whose small
symmetry-breaking forces carry unstable symmetric structures (rocksalt metals) off the saddle point
where an exactly symmetric calculator stays.

Each material's result is written as soon as it is known to ``out_dir/results/<id>.json``
(atomically, see :mod:`mlip.workflows.sharding`)::

    {"id", "material_id", "formula", "n_atoms", "energy" (eV, total), "converged", "n_steps",
     "fmax_final" (eV/Å), "structure" ({symbols, cell_A, positions_A, masses_amu}),
     "wall_time_s"}

or, for a material that could not be relaxed (an element the model lacks, atoms on top of each
other, non-finite forces, ...), ``{"id", "failed": true, "error", "traceback", "wall_time_s"}``;
the run goes on. A rerun skips every material with a result. ``out_dir/campaign.json`` records
the model, the settings and the structures: a folder holding another campaign is refused, so that
one model's energies are never mixed with another's.

With ``batch_size`` > 1 (an mlip model; torch-sim installed, Python >= 3.12) the materials are
relaxed together by :func:`mlip.workflows.discovery.batched_relax.relax_batched`: torch-sim's FIRE (ASE's
flavour and parameters) on a Fréchet cell filter, the convergence test of ASE's FIRE on
``FrechetCellFilter``, each result written as its material leaves the batch. Same records and
resume; ``wall_time_s`` is then the time a material spent in the batch (shared with the others).
Materials that fail the checks before relaxing are recorded at once; the materials of a batch
whose evaluation raised are relaxed again one at a time, so that the error is recorded for the one
that causes it. The settings recorded are the same, so one campaign may mix both paths.

The share of this process comes from ``n_shards``/``shard_index``, else a Slurm job array, else
a ``torchrun`` launch (``RANK``/``WORLD_SIZE``), balanced by atom count.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from ase import Atoms

from mlip.workflows.discovery.inputs import Material, read_structures
from mlip.workflows.sharding import load_results, run_sharded

#: shortest distance (Å) accepted between two atoms: the shortest bond of any crystal (H–H in
#: solid hydrogen) is 0.74 Å, so closer atoms are a broken input, not a structure to relax
MIN_DISTANCE = 0.5

CAMPAIGN_FILE = "campaign.json"


def closest_pair(atoms: Atoms, cutoff: float) -> Optional[tuple]:
    """(i, j, distance Å) of the closest pair of atoms (periodic images included) closer than
    ``cutoff``, or None."""
    from ase.neighborlist import neighbor_list

    i, j, d = neighbor_list("ijd", atoms, cutoff)
    if len(d) == 0:
        return None
    k = int(np.argmin(d))
    return int(i[k]), int(j[k]), float(d[k])


def relax_material(atoms: Atoms, calc, fmax: float = 0.02, steps: int = 500,
                   min_distance: float = MIN_DISTANCE, fix_symmetry: bool = False) -> Dict[str, Any]:
    """Relax one material (FIRE + FrechetCellFilter) and return its result record (see the
    module docstring). Raises ValueError for atoms closer than ``min_distance`` Å and RuntimeError
    for a non-finite energy or forces."""
    from mlip.workflows.relax import relax

    pair = closest_pair(atoms, min_distance)
    if pair is not None:
        i, j, d = pair
        raise ValueError(f"atoms {i} and {j} are {d:.3f} Å apart (< {min_distance} Å): not a structure to relax")
    t0 = time.perf_counter()
    result = relax(atoms, calc, fmax=fmax, steps=steps, cell_filter=True, progress=False, fix_symmetry=fix_symmetry)
    if not np.isfinite(result.energy):
        raise RuntimeError(f"non-finite energy {result.energy} after relaxation")
    return result_record(atoms, result, time.perf_counter() - t0)


def result_record(atoms: Atoms, result, wall_time_s: float) -> Dict[str, Any]:
    """The result record (see the module docstring) of ``atoms`` relaxed into ``result`` (a
    :class:`mlip.workflows.relax.RelaxResult`), without the ids."""
    from mlip.io import atoms_to_dict

    return {
        "formula": atoms.get_chemical_formula(),
        "n_atoms": len(atoms),
        "energy": float(result.energy),
        "converged": bool(result.converged),
        "n_steps": int(result.n_steps),
        "fmax_final": float(result.fmax_final),
        "structure": {k: np.asarray(v).tolist() if not isinstance(v, list) else v
                      for k, v in atoms_to_dict(result.atoms).items()},
        "wall_time_s": float(wall_time_s),
    }


def model_info(calc) -> dict:
    """Label, parameter count, cutoff (Å) and package versions, for the model YAML skeleton."""
    import importlib.metadata

    from mlip.version import __version__
    from mlip.calculators.model_loading import calculator_cutoff, describe_model, potential_of

    potential = potential_of(calc)
    requirements = {"mlip-torch": __version__}
    for dist in ("torch", "ase", "numpy", "pymatgen"):
        try:
            requirements[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "label": describe_model(calc),
        "n_params": None if potential is None else int(sum(p.numel() for p in potential.parameters())),
        "cutoff": calculator_cutoff(calc),
        "mlip_version": __version__,
        "requirements": requirements,
    }


def campaign_manifest(calc, materials: Sequence[Material], settings: dict) -> dict:
    """What ``campaign.json`` records: model fingerprint and label, settings, ids, structures."""
    from mlip.workflows.fingerprints import structures_fingerprint
    from mlip.calculators.model_loading import describe_model
    from mlip.workflows.fingerprints import model_fingerprint

    return {
        "task": "matbench-discovery IS2RE-SR relaxation",
        "model_info": model_info(calc),
        "model": model_fingerprint(calc),
        "model_label": describe_model(calc),
        "settings": dict(sorted(settings.items())),
        "materials": [m.material_id for m in materials],
        "structures": structures_fingerprint([m.atoms for m in materials]),
    }


def claim_campaign(out_dir: Path, manifest: dict) -> None:
    """Write ``out_dir/campaign.json``, or check that the one there describes the same campaign
    (ValueError naming what differs otherwise)."""
    from mlip.io import read_json, write_json

    path = Path(out_dir) / CAMPAIGN_FILE
    old = read_json(path) if path.exists() else None
    if old is not None:
        changed = [key for key in ("model", "settings", "materials", "structures") if old.get(key) != manifest[key]]
        if changed:
            raise ValueError(f"{out_dir} holds a discovery campaign with another {', '.join(changed)}; "
                             f"use another output folder (or delete it to start over)")
        return
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_json(path, manifest)


def run_discovery_relax(
    structures: Union[str, Path, Sequence[Union[str, Path]], Sequence[Material]],
    calculator,
    out_dir: Union[str, Path],
    fmax: float = 0.02,
    steps: int = 500,
    n_shards: Optional[int] = None,
    shard_index: Optional[int] = None,
    progress: bool = True,
    dtype: str = "float64",
    device: str = "auto",
    structure_key: Optional[str] = None,
    min_distance: float = MIN_DISTANCE,
    fix_symmetry: bool = False,
    batch_size: int = 1,
) -> Dict[str, Any]:
    """Relax this process's share of ``structures`` and store each result as it finishes.

    Args:
        structures: structures file(s) (:func:`mlip.workflows.discovery.inputs.read_structures`)
            or a list of :class:`Material`.
        calculator: anything :func:`mlip.workflows.resolve_calculator` accepts; resolved once.
        out_dir: campaign folder (``campaign.json``, ``results/<id>.json``).
        fmax: force threshold, eV/Å (default 0.02).
        steps: maximum FIRE steps (default 500).
        n_shards: the number of shards (default: Slurm array, torchrun, or one).
        shard_index: this process's shard (default: Slurm array, torchrun, or 0).
        progress: a progress bar over materials (materials/min).
        dtype: for mlip models (float64 by default).
        device: for mlip models (``"auto"`` by default).
        structure_key: column of structures in JSON tables (default: automatic).
        min_distance: atoms closer than this (Å) make a material fail at once.
        fix_symmetry: keep each structure's space group (ASE ``FixSymmetry``, symprec 0.01 Å; not the
            benchmark's protocol, see the module docstring). Recorded in the campaign's settings.
        batch_size: 1 relaxes one material at a time with ASE; N > 1 relaxes them in batches with
            torch-sim (see the module docstring), at most N times the largest material's atom count
            in a batch. Needs an mlip model and the ``torchsim`` extra (Python >= 3.12).

    Returns:
        counts ``{"shard", "n_shards", "assigned", "skipped", "computed", "failed", "n_materials",
        "n_done"}`` (``n_done``: materials of the whole campaign with a result in ``out_dir``).
    """
    from mlip.calculators.model_loading import potential_of, resolve_calculator

    if not fmax > 0:
        raise ValueError(f"fmax must be positive, got {fmax}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if int(batch_size) < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    if batch_size > 1 and fix_symmetry:
        raise ValueError("fix_symmetry relaxes one material at a time: use a batch size of 1")
    if batch_size > 1:
        from mlip.integrations import require_torch_sim

        require_torch_sim(f"a batch size of {batch_size}")  # before anything is loaded or written
    if isinstance(structures, (str, Path)) or (
            isinstance(structures, (list, tuple)) and structures and isinstance(structures[0], (str, Path))):
        materials: List[Material] = read_structures(structures, key=structure_key)
    else:
        materials = list(structures)
    if not materials:
        raise ValueError("no structures to relax")
    calc = resolve_calculator(calculator, device=device, dtype=dtype)
    if batch_size > 1 and potential_of(calc) is None:
        raise ValueError(f"a batch size above 1 needs an mlip model, not {type(calc).__name__}; "
                         f"use a batch size of 1")
    out_dir = Path(out_dir)
    settings = {"fmax": float(fmax), "steps": int(steps), "optimizer": "FIRE", "cell_filter": "FrechetCellFilter",
                "dtype": dtype, "min_distance": float(min_distance)}
    if fix_symmetry:  # (absent otherwise, so that earlier campaign folders still match)
        settings["fix_symmetry"] = True
    claim_campaign(out_dir, campaign_manifest(calc, materials, settings))

    def compute(material_id: str, material: Material) -> Dict[str, Any]:
        record = relax_material(material.atoms, calc, fmax=fmax, steps=steps, min_distance=min_distance,
                                fix_symmetry=fix_symmetry)
        return {"material_id": material_id, **record}

    costs = [len(m.atoms) for m in materials]
    if batch_size > 1:
        counts = relax_in_batches(materials, calc, out_dir, fmax=fmax, steps=steps, min_distance=min_distance,
                                  batch_size=batch_size, costs=costs, n_shards=n_shards,
                                  shard_index=shard_index, progress=progress)
    else:
        items = [(m.material_id, m) for m in materials]
        counts = run_sharded(items, compute, out_dir, costs=costs, n_shards=n_shards,
                             shard_index=shard_index, progress=progress, desc="relax")
    counts["n_materials"] = len(materials)
    counts["n_done"] = len(load_results(out_dir, [m.material_id for m in materials]))
    return counts


def failure_record(err: BaseException, wall_time_s: float = 0.0) -> Dict[str, Any]:
    """The result record of a material that could not be relaxed (as :func:`run_sharded` writes it)."""
    import traceback

    return {"failed": True, "error": f"{type(err).__name__}: {err}",
            "traceback": "".join(traceback.format_exception(type(err), err, err.__traceback__)),
            "wall_time_s": float(wall_time_s)}


def relax_in_batches(materials: Sequence[Material], calc, out_dir: Union[str, Path], fmax: float, steps: int,
                     min_distance: float, batch_size: int, costs: Sequence[float],
                     n_shards: Optional[int] = None, shard_index: Optional[int] = None,
                     progress: bool = True) -> Dict[str, int]:
    """The batched path of :func:`run_discovery_relax` (see the module docstring): this shard's
    materials without a result, relaxed with torch-sim, each result written as it leaves the batch.
    Returns the counts of :func:`mlip.workflows.sharding.run_sharded`."""
    from mlip.integrations.torchsim import MLIPModel
    from mlip.workflows.discovery.batched_relax import BatchEvaluationError, relax_batched
    from mlip.structure_checks import validate_atoms
    from mlip.calculators.model_loading import potential_of
    from mlip.workflows.sharding import pending_items, write_result

    potential = potential_of(calc)
    if potential is None:
        raise ValueError(f"a batch size above 1 needs an mlip model, not {type(calc).__name__}")
    ids = [m.material_id for m in materials]
    todo, counts = pending_items(ids, out_dir, costs, n_shards, shard_index)
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=counts["assigned"], initial=counts["skipped"], unit="item", dynamic_ncols=True,
                   desc=f"relax, batches (shard {counts['shard'] + 1}/{counts['n_shards']})")

    def store(material_id: str, record: Dict[str, Any]) -> None:
        write_result(out_dir, material_id, record)
        counts["computed"] += 1
        counts["failed"] += bool(record.get("failed"))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(failed=counts["failed"], refresh=False)

    def checked():
        """The materials that pass the checks of the one-at-a-time path; the others recorded."""
        allowed = potential.atomic_numbers.tolist()
        for k in todo:
            atoms = materials[k].atoms
            if not all(atoms.pbc):  # no cell to relax: the one-at-a-time path relaxes the positions
                t0 = time.perf_counter()
                try:
                    record = {"material_id": ids[k], **relax_material(atoms, calc, fmax=fmax, steps=steps,
                                                                      min_distance=min_distance)}
                except Exception as err:
                    record = failure_record(err, time.perf_counter() - t0)
                store(ids[k], record)
                continue
            try:
                pair = closest_pair(atoms, min_distance)
                if pair is not None:
                    i, j, d = pair
                    raise ValueError(f"atoms {i} and {j} are {d:.3f} Å apart (< {min_distance} Å): "
                                     f"not a structure to relax")
                validate_atoms(atoms, allowed, cutoff=float(potential.cutoff))
            except ValueError as err:
                store(ids[k], failure_record(err))
                continue
            yield k, atoms

    model = MLIPModel(potential, device=calc.device, dtype=calc.dtype, neighbor_backend=calc.neighbor_backend)
    max_atoms = batch_size * max([len(materials[k].atoms) for k in todo], default=1)
    try:
        batches = relax_batched(checked(), model, fmax=fmax, steps=steps, max_atoms=max_atoms)
        for k, outcome, seconds in batches:
            material = materials[k]
            if isinstance(outcome, BatchEvaluationError):  # find the material at fault: one at a time
                t0 = time.perf_counter()
                try:
                    record = relax_material(material.atoms, calc, fmax=fmax, steps=steps,
                                            min_distance=min_distance)
                except Exception as err:
                    record = failure_record(err, time.perf_counter() - t0)
            elif isinstance(outcome, Exception):
                record = failure_record(outcome, seconds)
            else:
                record = result_record(material.atoms, outcome, seconds)
            store(ids[k], {"material_id": material.material_id, **record}
                  if not record.get("failed") else record)
    finally:
        if bar is not None:
            bar.close()
    return counts


__all__ = ["MIN_DISTANCE", "campaign_manifest", "claim_campaign", "closest_pair", "failure_record",
           "relax_in_batches", "relax_material", "result_record", "run_discovery_relax"]
