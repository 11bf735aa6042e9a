"""The graph of one structure per call, as a calculator needs it, reusing what did not change.

An MD run or a relaxation at fixed cell asks for the graph of the same structure again and again with
new positions only. :class:`GraphBuilder` builds exactly the graph that
``batch_atoms([atoms], cutoff, dtype, device, neighbor_backend, recenter=True, allowed_numbers)``
builds, with the same checks and errors, but keeps from one call to the next what depends only on the
atomic numbers, the cell and the periodicity: the validation of the cell, of the elements and of the
neighbour bound (:func:`mlip.structure_checks.validate_atoms`), and the numbers, cell, pbc and batch
tensors in the graph's dtype and device. The positions (finiteness included) are checked, and the
neighbour list built and checked for coincident atoms, on every call.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch

from mlip.graph import AtomicGraph, check_coincident_atoms
from mlip.neighbors import batched_neighbor_list
from mlip.structure_checks import validate_atoms

__all__ = ["GraphBuilder"]


class GraphBuilder:
    """Builds the :class:`~mlip.graph.AtomicGraph` of one ``ase.Atoms`` per call (see the module notes).

    Args:
        cutoff: neighbour-list cutoff (Å).
        dtype, device: of the graph's floating tensors and of all its tensors.
        neighbor_backend: ``"auto"``, ``"vesin"``, ``"torch"`` or ``"cuda"``.
        allowed_numbers: the atomic numbers the potential supports (None: any).
        check_size: called with a structure that passed validation, before its neighbour list is built,
            whenever its numbers, cell or pbc change (the calculator's memory check,
            :class:`mlip.calculators.memory.MemoryCheck`); it raises to refuse the structure.

    What is reused is keyed on the exact bytes of the atomic numbers, the cell and pbc, and is kept only
    for a structure that passed validation and is fully periodic or not periodic at all (for mixed
    periodicity the neighbour bound depends on the positions, so it is checked on every call).
    """

    def __init__(
        self,
        cutoff: float,
        dtype: torch.dtype = torch.float64,
        device=None,
        neighbor_backend: str = "auto",
        allowed_numbers: Optional[Sequence[int]] = None,
        check_size: Optional[Callable[[object], None]] = None,
    ):
        self.cutoff = float(cutoff)
        self.dtype = dtype
        self.device = device
        self.neighbor_backend = neighbor_backend
        self.allowed_numbers = None if allowed_numbers is None else [int(z) for z in allowed_numbers]
        self.check_size = check_size
        self._key: Optional[tuple] = None
        self._fixed: Optional[dict] = None

    @staticmethod
    def key(atoms) -> tuple:
        """What the reused part depends on: the atomic numbers, cell and pbc, byte for byte."""
        return (np.asarray(atoms.numbers, dtype=np.int64).tobytes(),
                np.asarray(atoms.cell.array, dtype=np.float64).tobytes(),
                np.asarray(atoms.pbc, dtype=bool).tobytes())

    def _fixed_part(self, atoms) -> dict:
        """Tensors that depend only on numbers, cell and pbc: float64 CPU ones for the neighbour
        search and the coincidence check, and their copies in the graph's dtype and device."""
        n = len(atoms)
        numbers = torch.from_numpy(np.asarray(atoms.numbers, dtype=np.int64).copy())
        cell = torch.from_numpy(np.asarray(atoms.cell.array, dtype=np.float64).copy())[None]
        pbc = torch.from_numpy(np.asarray(atoms.pbc, dtype=bool).copy())[None]
        batch = torch.zeros(n, dtype=torch.int64)
        nl_device = None
        if self.neighbor_backend in ("torch", "cuda") and self.device is not None:
            nl_device = self.device
        return {
            "cell": cell, "batch": batch,
            "nl": (cell, pbc, batch) if nl_device is None else (cell.to(nl_device), pbc.to(nl_device),
                                                                batch.to(nl_device)),
            "nl_device": nl_device,
            "graph": {"numbers": numbers.to(device=self.device),
                      "cell": cell.to(device=self.device, dtype=self.dtype),
                      "pbc": pbc.to(device=self.device), "batch": batch.to(device=self.device)},
        }

    def __call__(self, atoms) -> AtomicGraph:
        """The graph of ``atoms``; ValueError naming the problem for a structure no model can evaluate."""
        key = self.key(atoms)
        positions = np.asarray(atoms.get_positions(), dtype=np.float64)
        if key == self._key and len(positions) and np.isfinite(positions).all():
            fixed = self._fixed  # numbers, cell and pbc validated before, positions finite
        else:
            self._key, self._fixed = None, None
            validate_atoms(atoms, self.allowed_numbers, cutoff=self.cutoff)
            if self.check_size is not None:
                self.check_size(atoms)
            fixed = self._fixed_part(atoms)
            pbc = np.asarray(atoms.pbc, dtype=bool)
            if pbc.all() or not pbc.any():  # the neighbour bound does not depend on the positions
                self._key, self._fixed = key, fixed
        positions = torch.from_numpy(positions - positions.mean(axis=0, keepdims=True))
        cell, pbc, batch = fixed["nl"]
        nl_device = fixed["nl_device"]
        edge_index, shifts = batched_neighbor_list(
            positions if nl_device is None else positions.to(nl_device), cell, pbc, batch, self.cutoff,
            backend=self.neighbor_backend,
        )
        check_coincident_atoms([atoms], positions, fixed["cell"], fixed["batch"], edge_index, shifts)
        graph = fixed["graph"]
        return AtomicGraph(
            positions=positions.to(device=self.device, dtype=self.dtype),
            numbers=graph["numbers"],
            cell=graph["cell"],
            pbc=graph["pbc"],
            batch=graph["batch"],
            edge_index=edge_index.to(device=self.device, dtype=torch.int64),
            shifts=shifts.to(torch.float64).to(device=self.device, dtype=self.dtype),
            cutoff=self.cutoff,
        )
