"""ASE calculator serving any :class:`mlip.Potential`."""

from __future__ import annotations

import copy
import os
from typing import Optional, Union

import numpy as np
import torch
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes

from mlip.allocator import tune_malloc
from mlip.calculators.compiled_network import CompiledEvaluation, warm_up
from mlip.calculators.memory import MemoryCheck
from mlip.graph_builder import GraphBuilder
from mlip.potential import Potential

_DTYPES = {"float32": torch.float32, "float64": torch.float64, torch.float32: torch.float32, torch.float64: torch.float64}


def resolve_device(device: Union[str, torch.device, None]) -> torch.device:
    """``"auto"`` (or None) → CUDA when available, else CPU."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype) -> torch.dtype:
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    return _DTYPES[dtype]


def _same(a, b) -> bool:
    """Deep equality for ``atoms.info`` values (dicts, lists, numpy arrays, scalars)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (np.ndarray, list, tuple)) or isinstance(b, (np.ndarray, list, tuple)):
        try:
            a_arr, b_arr = np.asarray(a), np.asarray(b)
        except Exception:
            return False
        if a_arr.shape != b_arr.shape:
            return False
        try:
            return bool(np.array_equal(a_arr, b_arr))
        except Exception:
            return all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


def _identical(a, b) -> bool:
    """Whether two ``ase.Atoms`` have exactly equal cell, pbc, per-atom arrays and ``info``: the cheap
    test that lets ASE's ``get_forces`` / ``get_stress`` after ``get_potential_energy`` skip its
    tolerance comparison (anything not exactly equal goes through that comparison)."""
    if a.arrays.keys() != b.arrays.keys():
        return False
    if not (np.array_equal(a.pbc, b.pbc) and np.array_equal(a.cell.array, b.cell.array)):
        return False
    if not all(np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays):
        return False
    return _same(a.info, b.info)


class GraphCalculator(Calculator):
    """What the package's calculators share: results kept while the atoms are bit for bit those of the
    last call or ASE finds no change (``atoms.info`` included), and the start of every calculation (ASE's
    bookkeeping, the structure's graph from the subclass's ``_graph_builder()``, whether it has a
    volume). Subclasses: :class:`MLIPCalculator`, :class:`mlip.calculators.CommitteeCalculator`."""

    def check_state(self, atoms, tol: float = 1e-15):
        if self.atoms is not None and _identical(self.atoms, atoms):
            return []  # bit for bit the atoms of the last call (ASE's comparison would find no change)
        changes = super().check_state(atoms, tol=tol)
        if self.atoms is not None and "info" not in changes and not _same(self.atoms.info, atoms.info):
            changes.append("info")
        return changes

    def _graph_builder(self) -> GraphBuilder:
        raise NotImplementedError

    def _start(self, atoms, properties, system_changes):
        """ASE's ``calculate`` bookkeeping, then ``(atoms, graph, has_volume)`` of the structure; the graph
        is built after the structure is validated (ValueError naming the problem), and stress asked of a
        structure without a volume is a PropertyNotImplementedError."""
        super().calculate(atoms, properties, system_changes)
        atoms = self.atoms
        graph = self._graph_builder()(atoms)  # validates the structure first (ValueError naming the problem)
        has_volume = atoms.cell.rank == 3 and abs(atoms.cell.volume) > 0
        if "stress" in properties and not has_volume:
            raise PropertyNotImplementedError(
                "stress needs a cell with non-zero volume (this structure has "
                f"cell rank {atoms.cell.rank}, pbc={atoms.pbc.tolist()})"
            )
        return atoms, graph, has_volume


class MLIPCalculator(GraphCalculator):
    """ASE calculator for an mlip potential.

    Properties: ``energy``, ``free_energy`` (= energy), ``energies`` (per atom, summing to the
    energy), ``forces`` (−∂E/∂r) and ``stress`` (Voigt, eV/Å³, ASE sign; needs a cell of non-zero
    volume). Everything is computed in one pass and cached until positions, numbers, cell, pbc or
    ``atoms.info`` change.

    Args:
        potential: the :class:`mlip.Potential` to serve. The calculator keeps its own copy, on
            the requested device and dtype, with the weights frozen (no gradient with respect to
            them: forces and stress only need the positions and the strain), so training the
            original later neither changes nor is changed by the calculator.
        device: ``"auto"`` (CUDA if available), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        dtype: ``"float32"`` (fast MD) or ``"float64"`` (relaxations, phonons, finite differences).
        neighbor_backend: ``"auto"``, ``"vesin"`` or ``"torch"``.
        compile: evaluate through ``torch.compile``: energy, forces and stress in one compiled graph
            (dynamic shapes; the derivatives traced into it), for MD and relaxations of one structure,
            where the per-call cost of eager PyTorch dominates small cells. The first call compiles
            (minutes on a CPU for the shipped transformers), the kernels are built for the thread
            count torch uses then, and a failed compilation warns and runs eagerly
            (:mod:`mlip.calculators.compiled_network`).
        check_memory: estimate the memory of an evaluation before its graph is built and refuse a
            structure that would not fit in the memory available (:mod:`mlip.calculators.memory`);
            default: on, unless the environment sets ``MLIP_MEMORY_CHECK=0``.

    Invalid input raises ``ValueError`` naming the problem: elements the potential was not built
    for, NaN/inf coordinates, a periodic structure whose cell has zero volume or is so small that
    an atom would have more than ``mlip.structure_checks.MAX_NEIGHBORS_PER_ATOM`` neighbours within
    the cutoff, two atoms at the same position, an empty structure; ``InsufficientMemoryError`` (a
    ``ValueError``) a structure whose evaluation would need more memory than is available.
    """

    implemented_properties = ["energy", "free_energy", "energies", "forces", "stress"]
    ignored_changes: set = set()

    def __init__(
        self,
        potential: Potential,
        device: Union[str, torch.device] = "auto",
        dtype: Union[str, torch.dtype] = "float32",
        neighbor_backend: str = "auto",
        compile: bool = False,
        check_memory: Optional[bool] = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(potential, Potential):
            raise TypeError(f"MLIPCalculator needs an mlip.Potential, got {type(potential).__name__}")
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.neighbor_backend = neighbor_backend
        if check_memory is None:
            check_memory = os.environ.get("MLIP_MEMORY_CHECK", "1").strip() not in ("0", "false", "no")
        #: refuse a structure whose evaluation would not fit in the memory available (see the class notes)
        self.check_memory = bool(check_memory)
        potential = copy.deepcopy(potential).to(device=self.device, dtype=self.dtype)
        self.potential = potential.requires_grad_(False).eval()
        self._builder = None  # (configuration, GraphBuilder), see _graph_builder
        #: the compiled evaluation of ``compile=True`` (:class:`CompiledEvaluation`), or None
        self.compiled = None
        if compile:
            if self.potential.isolated_reference:
                self.potential.per_element_offsets(self.dtype)  # cached eagerly, before any compilation
            warm_up(self.potential.model, self.dtype)
            self.compiled = CompiledEvaluation(self.potential)
        if self.device.type == "cpu":
            tune_malloc()  # linear cost in system size on CPU (see mlip.allocator)

    def _graph_builder(self) -> GraphBuilder:
        """The builder of this calculator's graphs (what ``batch_atoms([atoms], ..., recenter=True)``
        builds, reusing the checks and tensors of an unchanged cell, pbc and elements between calls),
        made again whenever the potential's cutoff or elements, or the dtype, device or backend change."""
        config = (self.potential.cutoff, tuple(self.potential.atomic_numbers.tolist()), self.dtype,
                  self.device, self.neighbor_backend)
        if self._builder is None or self._builder[0] != config:
            check = MemoryCheck(self.potential, self.dtype, self.device) if self.check_memory else None
            self._builder = (config, GraphBuilder(config[0], dtype=self.dtype, device=self.device,
                                                  neighbor_backend=self.neighbor_backend,
                                                  allowed_numbers=config[1], check_size=check))
        return self._builder[1]

    def calculate(self, atoms=None, properties=None, system_changes=all_changes):
        if properties is None:
            properties = self.implemented_properties
        atoms, graph, has_volume = self._start(atoms, properties, system_changes)
        if self.compiled is not None:
            out = self.compiled(graph, compute_stress=has_volume)
        else:
            out = self.potential(graph, compute_forces=True, compute_stress=has_volume)
        energy = float(out["energy"].detach().to(torch.float64).cpu()[0])
        if not np.isfinite(energy):
            raise RuntimeError("the potential returned a non-finite energy")
        self.results = {
            "energy": energy,
            "free_energy": energy,
            "energies": out["energies"].detach().to(torch.float64).cpu().numpy(),
            "forces": out["forces"].detach().to(torch.float64).cpu().numpy(),
        }
        if has_volume:
            self.results["stress"] = out["stress"].detach().to(torch.float64).cpu().numpy()[0]
