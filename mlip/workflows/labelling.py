"""Labelling structures with a reference calculator: energies, forces and stress for training data.

:func:`label_structures` computes the labels of a list of structures with any ASE calculator,
sharded and resumable through :mod:`mlip.workflows.sharding`: each structure's labels are written
as soon as they are known, a killed run loses at most the structures in flight, a rerun skips what
is done, and a structure whose calculation fails (an SCF that does not converge) is recorded with
its error, never dropped silently. :func:`write_labelled` then writes the labelled structures as
extxyz, the labels under named keys (``REF_energy``, ``REF_forces``, ``REF_stress``: what
:func:`mlip.data.read_dataset` looks for) and the provenance (calculator, version, settings, wall
time) in every frame.

The calculator is named by a :class:`Labeller`:

* ``emt``: ASE's EMT (seven fcc metals; the cheap test bed);
* ``gpaw``: GPAW with the fixed settings of the package's first-principles datasets
  (:data:`GPAW_PBE_SETTINGS`: PBE, plane waves, Γ-centred Monkhorst–Pack with a fixed k-point
  density, Fermi–Dirac smearing, tight SCF); run it under MPI as ``mpiexec -n 2 gpaw python -m mlip
  data label ...``: every rank computes, rank 0 writes. Its SCF is written to ``OUT_DIR/checkpoints``
  every few steps (:mod:`mlip.workflows.gpaw_checkpoint`), so a killed run loses minutes of the
  structures in flight, not the structures: the next run goes on from there;
* ``chgnet``: the CHGNet 0.3.0 foundation potential shipped in ``chgnet`` (extra ``teacher``), a
  teacher for distillation: its labels imitate the Materials Project's PBE/PBE+U energies with the
  MP2020 corrections (:data:`CHGNET_LABEL_NOTE`, written into every frame as ``label_note``); the
  energy is the cell's total energy in eV (CHGNet predicts eV/atom, its ASE calculator multiplies by
  the number of atoms);
* ``package.module:Class``: any ASE calculator class, created with keyword ``settings``.

The energy label is the force-consistent (free) energy where the calculator has one, so that
forces are its exact derivative.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from mlip.import_paths import import_object
from mlip.workflows.kpoints import band_edges, kpoint_mesh
from mlip.workflows.sharding import load_results, run_sharded

#: the settings of the package's GPAW datasets; different settings make a different dataset
GPAW_PBE_SETTINGS: Dict[str, Any] = {
    "xc": "PBE",
    "ecut_eV": 400.0,
    "kpoint_density_per_inv_A": 2.5,
    "gamma_centred": True,
    "smearing": "fermi-dirac",
    "smearing_width_eV": 0.1,
    "spinpol": False,
    "setups": "paw",
    "convergence_energy_eV_per_electron": 1e-6,
    "convergence_forces_eV_per_A": 1e-4,
}
#: optional GPAW settings and their defaults (a dataset's provenance lists only those it sets, so the
#: settings of the first datasets stay as they were): ``kpoint_even`` rounds the mesh up to even sizes;
#: ``metal_kpoint_density_per_inv_A`` labels a periodic structure whose first calculation finds a metal
#: (band gap at most ``metal_gap_eV``; 0: a band crosses the Fermi level) again on a denser mesh,
#: Γ-centred or not and even or not as ``metal_gamma_centred`` and ``metal_kpoint_even`` say
GPAW_KPOINT_OPTIONS: Dict[str, Any] = {
    "kpoint_even": False,
    "metal_kpoint_density_per_inv_A": None,
    "metal_gamma_centred": True,
    "metal_kpoint_even": False,
    "metal_gap_eV": 0.0,
}

#: the settings of ``chgnet`` labels: the model shipped in the chgnet wheel, on the CPU, isolated atoms
#: (no neighbour within the cutoff) labelled by the model's per-element reference energy
CHGNET_SETTINGS: Dict[str, Any] = {"model": "0.3.0", "use_device": "cpu", "on_isolated_atoms": "ignore"}
#: what ``chgnet`` labels are, written into every labelled frame
CHGNET_LABEL_NOTE = ("CHGNet 0.3.0 predictions (a model trained on MPtrj: PBE and PBE+U of the Materials "
                     "Project with the MP2020 energy corrections), not DFT; energy: total eV per cell")

#: the folder of a labelling run (beside ``results``) where GPAW keeps the SCF of the structures it is on
#: (:mod:`mlip.workflows.gpaw_checkpoint`; gigabytes at most, ignored by git, emptied as labels finish)
CHECKPOINTS = "checkpoints"

#: per-frame keys of the labels in the files :func:`write_labelled` writes
LABEL_KEYS = {"energy": "REF_energy", "forces": "REF_forces", "stress": "REF_stress"}


def _settings_mesh(atoms, settings: Dict[str, Any]) -> Tuple[int, int, int]:
    """The mesh of GPAW ``settings`` for ``atoms``: their density, even sizes where ``kpoint_even``."""
    return kpoint_mesh(atoms, settings["kpoint_density_per_inv_A"], even=bool(settings.get("kpoint_even")))


def _one_blas_thread() -> bool:
    """Limit this process's BLAS libraries to one thread, unless ``OMP_NUM_THREADS`` says otherwise;
    whether they were limited.

    GPAW parallelises over MPI ranks; a threaded BLAS beside them puts more threads than cores on the
    machine (OpenBLAS starts one per core in every rank), and its threads then spin waiting for each
    other. ``gpaw -P N python`` sets ``OMP_NUM_THREADS=1`` for that reason, ``mpiexec -n N gpaw
    python`` does not. On 2 cores beside other jobs a calculation took 9–12 times the CPU with
    OpenBLAS's default threads as with one (``benchmarks/data/gpaw_blas_threads.py``, ``docs/data.md``).
    The libraries are loaded by then, so the limit is set through ``threadpoolctl`` (the extra ``dft``)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return False  # the user chose
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        warnings.warn("GPAW with threaded BLAS: set OMP_NUM_THREADS=1 or install threadpoolctl "
                      "(pip install 'mlip-torch[dft]'); threaded BLAS beside MPI ranks is many times slower")
        return False
    threadpool_limits(1, user_api="blas")
    return True


def gpaw_calculator(atoms, settings: Dict[str, Any], mesh: Optional[Sequence[int]] = None):
    """A GPAW calculator for ``atoms`` with the physics of ``settings`` (the keys of
    :data:`GPAW_PBE_SETTINGS`, and :data:`GPAW_KPOINT_OPTIONS`' ``kpoint_even``) on the Monkhorst–Pack
    ``mesh`` (default: the settings' k-point density applied to ``atoms``' cell by
    :func:`mlip.workflows.kpoints.kpoint_mesh`), Γ-centred as the settings say."""
    from mlip.extras import require

    gpaw = require("gpaw", "dft", "labelling with GPAW")
    _one_blas_thread()
    sizes = tuple(_settings_mesh(atoms, settings) if mesh is None else mesh)
    return gpaw.GPAW(
        mode=gpaw.PW(settings["ecut_eV"]),
        xc=settings["xc"],
        kpts={"size": sizes, "gamma": bool(settings["gamma_centred"])},
        occupations=gpaw.FermiDirac(settings["smearing_width_eV"]),
        spinpol=bool(settings["spinpol"]),
        setups=settings["setups"],
        convergence={"energy": settings["convergence_energy_eV_per_electron"],
                     "forces": settings["convergence_forces_eV_per_A"]},
        txt=None,
    )


def gpaw_label(atoms, settings: Dict[str, Any], checkpoint: Optional[Union[str, Path]] = None) -> Dict[str, Any]:
    """GPAW's labels of ``atoms`` (:func:`label_atoms`' record) under ``settings``, with
    ``label_details``: the k-point mesh, the MPI ranks that computed it and, for a periodic structure, the
    band gap on the mesh. With ``metal_kpoint_density_per_inv_A`` set, a periodic structure found metallic
    (gap at most ``metal_gap_eV``) is labelled again on the metal mesh, whose labels are kept (the details
    then name both meshes and the first gap; the wall time is both calculations'). With ``checkpoint`` (a ``.gpw``
    path) the SCF is written there every few steps and a killed label goes on from it
    (:mod:`mlip.workflows.gpaw_checkpoint`; the metal mesh's beside it, ``.metal.gpw``)."""

    def label(calc, path):
        """(record, the calculator that finished it: a resumed label's is the checkpoint's)"""
        if path is None:
            return label_atoms(atoms, calc), calc
        from mlip.workflows.gpaw_checkpoint import label_with_checkpoints

        record, calc = label_with_checkpoints(atoms, calc, path, label_atoms)
        record.pop("resumed_after_scf_steps", None)  # a label is the same whether or not it was resumed
        return record, calc

    checkpoint = None if checkpoint is None else Path(checkpoint)
    first_mesh = _settings_mesh(atoms, settings)
    record, calc = label(gpaw_calculator(atoms, settings, mesh=first_mesh), checkpoint)
    from gpaw.mpi import world

    # the ranks that computed it: cpu_time_s is one rank's, so the machine's CPU time is this many times it
    details: Dict[str, Any] = {"kpoint_mesh": list(first_mesh), "mpi_ranks": int(world.size)}
    if atoms.pbc.any():
        details["band_gap_eV"] = band_edges(calc)["gap_eV"]
    metal_density = settings.get("metal_kpoint_density_per_inv_A")
    gap_limit = float(settings.get("metal_gap_eV", 0.0))
    if metal_density and atoms.pbc.any() and details["band_gap_eV"] <= gap_limit:
        metal = {**settings, "kpoint_density_per_inv_A": float(metal_density),
                 "gamma_centred": bool(settings.get("metal_gamma_centred", True)),
                 "kpoint_even": bool(settings.get("metal_kpoint_even", False))}
        mesh = _settings_mesh(atoms, metal)
        seconds, cpu = record["wall_time_s"], record["cpu_time_s"]
        record, _ = label(gpaw_calculator(atoms, metal, mesh=mesh),
                          None if checkpoint is None else checkpoint.with_suffix(".metal.gpw"))
        record["wall_time_s"] += seconds
        record["cpu_time_s"] += cpu
        details.update({"metal": True, "first_kpoint_mesh": list(first_mesh), "kpoint_mesh": list(mesh)})
    elif metal_density:
        details["metal"] = False
    record["label_details"] = details
    return record


@dataclass
class Labeller:
    """A reference calculator by name: ``make(atoms)`` returns the ASE calculator of one structure (a
    fresh one where the settings depend on the cell, as GPAW's k-points do; otherwise one instance
    shared by every structure); ``provenance`` is written into every labelled frame;
    ``label(atoms)`` gives a structure's labels (:func:`label_atoms` on ``make(atoms)`` unless the
    calculator labels in a way of its own, e.g. GPAW again on a denser mesh for a metal);
    ``label(atoms, checkpoint=PATH)`` lets a calculator that can (GPAW) write its unfinished state there
    and go on from it after a kill (others ignore it)."""

    name: str
    version: str
    settings: Dict[str, Any]
    make: Callable[[Any], Any] = field(repr=False)
    note: str = ""  #: what the labels are (e.g. a teacher's, not DFT): ``label_note`` in every frame
    custom_label: Optional[Callable[..., Dict[str, Any]]] = field(default=None, repr=False)
    #: whether ``custom_label`` takes ``checkpoint=PATH``
    checkpoints: bool = False

    def label(self, atoms, checkpoint: Optional[Union[str, Path]] = None) -> Dict[str, Any]:
        """The labels of ``atoms`` (:func:`label_atoms`' record)."""
        if self.custom_label is not None:
            if self.checkpoints and checkpoint is not None:
                return self.custom_label(atoms, checkpoint=checkpoint)
            return self.custom_label(atoms)
        return label_atoms(atoms, self.make(atoms))

    @property
    def provenance(self) -> Dict[str, Any]:
        out = {"calculator": self.name, "calculator_version": self.version,
               "calculator_settings": json.dumps(self.settings, sort_keys=True)}
        if self.note:
            out["label_note"] = self.note
        return out

    @property
    def is_writer(self) -> bool:
        """Whether this process writes results: every process computes, only MPI rank 0 of a GPAW run
        writes."""
        if self.name != "gpaw":
            return True
        from gpaw.mpi import world

        return world.rank == 0


def _version(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:  # a module that is not an installed distribution
        return str(getattr(importlib.import_module(module), "__version__", "unknown"))


def _full_settings(name: str, settings: Dict[str, Any], defaults: Dict[str, Any], extra: str,
                   purpose: str, optional: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``defaults`` overridden by ``settings`` after checking that every setting is known (one of
    ``defaults`` or ``optional``: ValueError naming the unknown ones) and that the package ``name`` is
    installed (the extra's message). Optional settings appear only where they are given."""
    from mlip.extras import require

    accepted = {**defaults, **(optional or {})}
    unknown = sorted(set(settings) - set(accepted))
    if unknown:
        raise ValueError(f"unknown {name} setting(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}")
    require(name, extra, purpose)
    return {**defaults, **settings}


def _chgnet_labeller(settings: Dict[str, Any]) -> Labeller:
    """CHGNet, loaded once (offline, from the wheel) and shared by every structure of the run."""
    full = _full_settings("chgnet", settings, CHGNET_SETTINGS, "teacher", "labelling with CHGNet")
    shared: List[Any] = []

    def make(atoms):
        if not shared:
            from chgnet.model import CHGNet
            from chgnet.model.dynamics import CHGNetCalculator

            model = CHGNet.load(model_name=str(full["model"]), use_device=full["use_device"], verbose=False)
            shared.append(CHGNetCalculator(model, use_device=full["use_device"],
                                           on_isolated_atoms=full["on_isolated_atoms"]))
        return shared[0]

    return Labeller("chgnet", _version("chgnet"), full, make,
                    note=CHGNET_LABEL_NOTE.replace("0.3.0", str(full["model"])))


def labeller(spec: str, settings: Optional[Dict[str, Any]] = None) -> Labeller:
    """The :class:`Labeller` named by ``spec`` (``emt``, ``gpaw``, ``chgnet`` or ``package.module:Class``),
    with keyword ``settings`` (for ``gpaw``: overrides of :data:`GPAW_PBE_SETTINGS`; for ``chgnet``: of
    :data:`CHGNET_SETTINGS`; for a class: its constructor's keywords). ValueError naming the problem for
    an unknown name or setting; :class:`mlip.extras.MissingExtraError` when the package is missing."""
    settings = dict(settings or {})
    if spec == "emt":
        if settings:
            raise ValueError(f"the emt calculator takes no settings, got {', '.join(sorted(settings))}")
        from ase.calculators.emt import EMT

        return Labeller("emt", _version("ase"), {}, lambda atoms: EMT())
    if spec == "gpaw":
        full = _full_settings("gpaw", settings, GPAW_PBE_SETTINGS, "dft", "labelling with GPAW",
                              optional=GPAW_KPOINT_OPTIONS)
        return Labeller("gpaw", _version("gpaw"), full, lambda atoms: gpaw_calculator(atoms, full),
                        custom_label=lambda atoms, checkpoint=None: gpaw_label(atoms, full, checkpoint),
                        checkpoints=True)
    if spec == "chgnet":
        return _chgnet_labeller(settings)
    if spec.count(":") == 1 and all(spec.split(":")):
        module_name, attr = spec.split(":")
        cls = import_object(spec, "calculator")
        if not isinstance(cls, type):
            raise ValueError(f"calculator {spec!r}: {attr} in {module_name} is not a class")
        try:
            shared = cls(**settings)
        except TypeError as err:
            raise ValueError(f"calculator {spec!r} does not accept the settings {settings}: {err}") from None
        # one instance for every structure (an ASE calculator recomputes whenever the atoms change): a
        # model-based calculator loads its weights once, not once per structure (SevenNet: 3.7 s each)
        return Labeller(spec, _version(module_name.split(".")[0]), settings, lambda atoms: shared)
    raise ValueError(f"unknown calculator {spec!r}: give emt, gpaw, chgnet or an ASE calculator class as "
                     "'package.module:Class'")


def _digest(atoms) -> str:
    """SHA-1 of the numbers, periodicity, and positions and cell rounded to 1e-8 Å. Adding +0.0 after
    rounding turns -0.0 into 0.0: a coordinate that is zero up to round-off (±1e-18 from a symmetrised
    relaxation step) has the same bytes, and so the same key, whatever the sign of its noise."""
    digest = hashlib.sha1()
    for array in (atoms.numbers.astype(np.int64), np.round(atoms.positions, 8) + 0.0,
                  np.round(atoms.cell.array, 8) + 0.0, atoms.pbc.astype(np.int8)):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def structure_id(atoms) -> str:
    """The structure's ``info["id"]``, or a hash of its numbers, positions, cell and periodicity."""
    return str(atoms.info["id"]) if "id" in atoms.info else "s-" + _digest(atoms)[:16]


def result_id(atoms) -> str:
    """The key of the structure's labels in a run's results: its id and a hash of its geometry, so that
    a structure changed under the same id is labelled again rather than given stale labels."""
    return f"{structure_id(atoms)}.{_digest(atoms)[:12]}"


def interleaved(structures: Sequence) -> List[int]:
    """Indices of ``structures`` taking one of each ``config_type`` in turn (first of each kind, then
    the second, ...), so that a run stopped early has labelled some of every kind."""
    seen: Dict[str, int] = {}
    rank = []
    for k, atoms in enumerate(structures):
        kind = str(atoms.info.get("config_type", ""))
        rank.append((seen.get(kind, 0), k))
        seen[kind] = seen.get(kind, 0) + 1
    return [k for _, k in sorted(rank)]


def label_atoms(atoms, calculator) -> Dict[str, Any]:
    """Energy (force-consistent where the calculator has it), forces and, for a structure periodic in
    three directions, stress (ASE's sign, Voigt order, eV/Å³) of ``atoms`` by ``calculator``; the wall
    time and this process's CPU time (``wall_time_s``, ``cpu_time_s``: one MPI rank's, which beside other
    jobs measures the cost where the wall time does not)."""
    from ase.calculators.calculator import PropertyNotImplementedError

    atoms = atoms.copy()
    atoms.calc = calculator
    t0, cpu0 = time.perf_counter(), time.process_time()
    forces = np.asarray(atoms.get_forces(), dtype=float)
    try:
        energy = float(atoms.get_potential_energy(force_consistent=True))
    except PropertyNotImplementedError:
        energy = float(atoms.get_potential_energy())
    record: Dict[str, Any] = {"energy": energy, "forces": forces.tolist()}
    if atoms.pbc.all():
        record["stress"] = np.asarray(atoms.get_stress(voigt=True), dtype=float).tolist()
    if not math.isfinite(energy) or not np.all(np.isfinite(forces)):
        raise RuntimeError("the calculator returned non-finite labels")
    record["wall_time_s"] = time.perf_counter() - t0
    record["cpu_time_s"] = time.process_time() - cpu0  # this process's (one MPI rank's), all its threads
    return record


def label_structures(structures: Sequence, labeller: Labeller, out_dir: Union[str, Path],
                     n_shards: Optional[int] = None, shard_index: Optional[int] = None,
                     progress: bool = True) -> Dict[str, int]:
    """Label this process's share of ``structures`` into ``out_dir/results`` (resumable; see the module
    docstring), one ``config_type`` after another in turn (:func:`interleaved`). Returns
    :func:`mlip.workflows.sharding.run_sharded`'s counts."""
    order = interleaved(structures)
    items = [(result_id(structures[k]), structures[k]) for k in order]
    provenance = labeller.provenance

    def compute(item_id: str, atoms) -> Dict[str, Any]:
        # a calculator that can (GPAW) keeps its unfinished SCF in out_dir/checkpoints: a killed run's
        # next start goes on from there instead of from the structure's beginning
        checkpoint = Path(out_dir) / CHECKPOINTS / f"{item_id}.gpw" if labeller.checkpoints else None
        return {**labeller.label(atoms, checkpoint=checkpoint), **provenance}

    costs = [float(len(atoms)) ** 2 for _, atoms in items]
    return run_sharded(items, compute, out_dir, costs=costs, n_shards=n_shards, shard_index=shard_index,
                       progress=progress and labeller.is_writer, desc="labelling", write=labeller.is_writer)


def labelling_status(structures: Sequence, out_dir: Union[str, Path]
                     ) -> Tuple[int, List[Tuple[str, str]], List[str]]:
    """(structures labelled, [(id, error)] of those that failed, [ids] without a result yet) of a run."""
    results = load_results(out_dir)
    done, failed, missing = 0, [], []
    for atoms in structures:
        record = results.get(result_id(atoms))
        if record is None:
            missing.append(structure_id(atoms))
        elif record.get("failed"):
            failed.append((structure_id(atoms), str(record.get("error", "unknown error"))))
        else:
            done += 1
    return done, failed, missing


def labelled_frames(structures: Sequence, out_dir: Union[str, Path]
                    ) -> Tuple[List, List[Tuple[str, str]], List[str]]:
    """The labelled ``structures`` (those with a result in ``out_dir``) as frames, in the order given:
    labels under :data:`LABEL_KEYS`, provenance (``calculator``, ``calculator_version``,
    ``calculator_settings``, ``label_note`` where the labeller has one, ``label_wall_time_s``) and the
    structure's own info in each frame. Returns (frames, [(id, error)] of failed structures, [ids] not
    labelled yet)."""
    results = load_results(out_dir)
    frames, failed, missing = [], [], []
    for atoms in structures:
        item_id = structure_id(atoms)
        record = results.get(result_id(atoms))
        if record is None:
            missing.append(item_id)
            continue
        if record.get("failed"):
            failed.append((item_id, str(record.get("error", "unknown error"))))
            continue
        frame = atoms.copy()
        frame.calc = None
        frame.info = {**atoms.info, "id": item_id}
        frame.info[LABEL_KEYS["energy"]] = float(record["energy"])
        frame.arrays[LABEL_KEYS["forces"]] = np.asarray(record["forces"], dtype=float).reshape(len(frame), 3)
        if "stress" in record:
            frame.info[LABEL_KEYS["stress"]] = np.asarray(record["stress"], dtype=float)
        for key in ("calculator", "calculator_version", "calculator_settings"):
            frame.info[key] = record[key]
        if "label_note" in record:
            frame.info["label_note"] = record["label_note"]
        if "label_details" in record:  # per structure, e.g. GPAW's k-point mesh and band gap
            frame.info["label_details"] = json.dumps(record["label_details"], sort_keys=True)
        frame.info["label_wall_time_s"] = float(record.get("wall_time_s", float("nan")))
        frames.append(frame)
    return frames, failed, missing


def write_labelled(structures: Sequence, out_dir: Union[str, Path], path: Union[str, Path]
                   ) -> Tuple[int, List[Tuple[str, str]], List[str]]:
    """Write the labelled ``structures`` (:func:`labelled_frames`) to the extxyz file ``path``,
    atomically, in the order given. Returns (frames written, [(id, error)] of failed structures, [ids]
    not labelled yet)."""
    from ase.io import write

    from mlip.io import atomic_write

    frames, failed, missing = labelled_frames(structures, out_dir)
    atomic_write(path, lambda tmp: write(tmp, frames, format="extxyz"))
    return len(frames), failed, missing


__all__ = ["CHGNET_LABEL_NOTE", "CHGNET_SETTINGS", "GPAW_KPOINT_OPTIONS", "GPAW_PBE_SETTINGS", "LABEL_KEYS",
           "Labeller", "gpaw_calculator", "gpaw_label", "kpoint_mesh", "label_atoms", "label_structures",
           "labeller", "labelling_status", "interleaved", "labelled_frames", "result_id", "structure_id",
           "write_labelled"]
