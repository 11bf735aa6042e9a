"""Atomic graphs: one or many structures batched together, built from ``ase.Atoms``.

A graph stores what the models need and nothing they could derive: positions, atomic numbers,
cells, periodicity, the structure index of every atom and the neighbour list as atom pairs plus
*integer* cell shifts. Edge vectors are formed in torch, ``pos[j] − pos[i] + S·cell``, by
:func:`edge_vectors`, so autograd reaches both positions and cell (forces and stress).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Optional, Sequence

import numpy as np
import torch

from mlip.neighbors import batched_neighbor_list
from mlip.structure_checks import validate_atoms


@dataclass
class AtomicGraph:
    """A batch of ``n_graphs`` structures with ``n_atoms`` atoms and ``n_edges`` directed edges.

    Attributes:
        positions: [n_atoms, 3] Cartesian positions (Å).
        numbers: [n_atoms] int64 atomic numbers.
        cell: [n_graphs, 3, 3] lattice vectors as rows (Å); rows of non-periodic directions are ignored.
        pbc: [n_graphs, 3] bool periodicity.
        batch: [n_atoms] int64 structure index of every atom (atoms of a structure are contiguous).
        edge_index: [2, n_edges] int64 pairs (i, j): atom i (the centre) receives from neighbour j.
        shifts: [n_edges, 3] integer cell shifts S (stored in the positions' dtype) with
            edge vector r_ij = pos[j] − pos[i] + S·cell.
        cutoff: the neighbour-list cutoff (Å).
    """

    positions: torch.Tensor
    numbers: torch.Tensor
    cell: torch.Tensor
    pbc: torch.Tensor
    batch: torch.Tensor
    edge_index: torch.Tensor
    shifts: torch.Tensor
    cutoff: float

    @property
    def n_atoms(self) -> int:
        return int(self.positions.shape[0])

    @property
    def n_graphs(self) -> int:
        return int(self.cell.shape[0])

    @property
    def n_edges(self) -> int:
        return int(self.edge_index.shape[1])

    def atoms_per_graph(self) -> torch.Tensor:
        """[n_graphs] number of atoms in each structure."""
        return torch.bincount(self.batch, minlength=self.n_graphs)

    def to(self, device=None, dtype: Optional[torch.dtype] = None) -> "AtomicGraph":
        """Copy to a device and/or floating dtype (integer tensors keep their dtype)."""
        kw = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor):
                if v.is_floating_point() and dtype is not None:
                    v = v.to(device=device, dtype=dtype)
                else:
                    v = v.to(device=device)
            kw[f.name] = v
        return replace(self, **kw)

    @classmethod
    def from_atoms(
        cls,
        atoms,
        cutoff: float,
        dtype: torch.dtype = torch.float64,
        device=None,
        neighbor_backend: str = "auto",
    ) -> "AtomicGraph":
        """Graph of one ``ase.Atoms`` (see :func:`batch_atoms`)."""
        return batch_atoms([atoms], cutoff, dtype=dtype, device=device, neighbor_backend=neighbor_backend)


# Two atoms (or an atom and a periodic image of another) closer than this are the same position
# given twice. No physical structure comes near it, and it stays above the resolution of float32
# coordinates a few hundred Å from the origin, where a smaller separation would round to zero.
COINCIDENT_DISTANCE = 1e-4


def batch_atoms(
    atoms_list: Sequence,
    cutoff: float,
    dtype: torch.dtype = torch.float64,
    device=None,
    neighbor_backend: str = "auto",
    recenter: bool = False,
    allowed_numbers: Optional[Sequence[int]] = None,
) -> AtomicGraph:
    """Build one :class:`AtomicGraph` from several ``ase.Atoms``.

    The neighbour list is computed in float64 on the CPU (or with the torch backend on ``device``).
    With ``recenter=True`` every structure is translated so that its centroid is at the origin
    (done in float64 before casting), which keeps float32 evaluations of structures far from the
    origin as accurate as near it; energies, forces and stress are translation invariant, so
    results are unchanged. Every structure is checked by :func:`validate_atoms` (with
    ``allowed_numbers``, when given, as the elements a potential supports, and the cutoff, so a
    cell too small for it is refused before its neighbour list is built), and the neighbour list
    by :func:`check_coincident_atoms`.
    """
    if len(atoms_list) == 0:
        raise ValueError("no structures given")
    for k, atoms in enumerate(atoms_list):
        try:
            validate_atoms(atoms, allowed_numbers, cutoff=cutoff)
        except ValueError as err:
            if len(atoms_list) == 1:
                raise
            raise ValueError(f"structure {k}: {err}") from None
    pos_np = []
    for atoms in atoms_list:
        p = np.asarray(atoms.get_positions(), dtype=np.float64)
        if recenter:
            p = p - p.mean(axis=0, keepdims=True)
        pos_np.append(p)
    positions = torch.from_numpy(np.concatenate(pos_np, axis=0))
    numbers = torch.from_numpy(np.concatenate([np.asarray(a.numbers, dtype=np.int64) for a in atoms_list]))
    cell = torch.from_numpy(np.stack([np.asarray(a.cell.array, dtype=np.float64) for a in atoms_list]))
    pbc = torch.from_numpy(np.stack([np.asarray(a.pbc, dtype=bool) for a in atoms_list]))
    counts = torch.tensor([len(a) for a in atoms_list], dtype=torch.int64)
    batch = torch.repeat_interleave(torch.arange(len(atoms_list), dtype=torch.int64), counts)

    nl_device = None
    if neighbor_backend in ("torch", "cuda") and device is not None:
        nl_device = device
    edge_index, shifts = batched_neighbor_list(
        positions.to(nl_device) if nl_device is not None else positions,
        cell.to(nl_device) if nl_device is not None else cell,
        pbc.to(nl_device) if nl_device is not None else pbc,
        batch.to(nl_device) if nl_device is not None else batch,
        float(cutoff),
        backend=neighbor_backend,
    )
    check_coincident_atoms(atoms_list, positions, cell, batch, edge_index, shifts)
    graph = AtomicGraph(
        positions=positions,
        numbers=numbers,
        cell=cell,
        pbc=pbc,
        batch=batch,
        edge_index=edge_index.to(torch.int64),
        shifts=shifts.to(torch.float64),
        cutoff=float(cutoff),
    )
    return graph.to(device=device, dtype=dtype)


def check_coincident_atoms(atoms_list, positions, cell, batch, edge_index, shifts) -> None:
    """Refuse two atoms, or an atom and a periodic image of another, closer than COINCIDENT_DISTANCE.

    Works on the neighbour list (``edge_index``, ``shifts`` on any device) of the float64
    ``positions``, ``cell`` and ``batch`` built from ``atoms_list``; the ValueError names the
    atoms by their index within their structure and their symbol (and the structure, in a batch).
    """
    if edge_index.shape[1] == 0:
        return
    dev = edge_index.device
    i, j = edge_index[0], edge_index[1]
    shifts = shifts.to(device=dev, dtype=torch.float64)
    post = positions.to(dev).t().contiguous()  # [3, N]
    cells = cell.to(dev)
    cells = cells[0] if cells.shape[0] == 1 else cells.index_select(0, batch.to(dev).index_select(0, i))
    d2 = torch.zeros_like(shifts[:, 0])
    for k in range(3):  # component by component, in place: a fraction of the neighbour search's cost
        vk = post[k].index_select(0, j)
        vk -= post[k].index_select(0, i)
        for c in range(3):
            vk += shifts[:, c] * cells[..., c, k]
        d2 += vk * vk
    close = torch.nonzero(d2 < COINCIDENT_DISTANCE**2)
    if close.numel() == 0:
        return
    e = int(close[0, 0])
    i, j = (int(x) for x in edge_index[:, e].cpu())  # global indices
    shift = [int(x) for x in shifts[e].cpu()]
    distance = float(d2[e].sqrt())
    g = int(batch[i])
    first = int(np.searchsorted(batch.cpu().numpy(), g))
    atoms = atoms_list[g]
    i, j = i - first, j - first
    sym = atoms.get_chemical_symbols()
    if any(shift):  # (an atom's own image this close needs a lattice vector that short: refused earlier)
        what = (f"atom {i} ({sym[i]}) and the periodic image of atom {j} ({sym[j]}) shifted by cell vectors "
                f"{shift} are at the same position")
    else:
        what = f"atoms {i} ({sym[i]}) and {j} ({sym[j]}) are at the same position"
    prefix = f"structure {g}: " if len(atoms_list) > 1 else ""
    raise ValueError(f"{prefix}{what} (distance {distance:.2g} Å, below {COINCIDENT_DISTANCE:g} Å); "
                     "remove the duplicate atom")


def edge_vectors(
    positions: torch.Tensor, cell: torch.Tensor, batch: torch.Tensor, edge_index: torch.Tensor, shifts: torch.Tensor
) -> torch.Tensor:
    """Edge vectors r_ij = pos[j] − pos[i] + S·cell[batch[i]].

    positions [n_atoms, 3], cell [n_graphs, 3, 3], batch [n_atoms], edge_index [2, n_edges],
    shifts [n_edges, 3] → [n_edges, 3]. Differentiable with respect to positions and cell.
    """
    i, j = edge_index[0], edge_index[1]
    shift_vec = vector_times_matrix(shifts.to(positions.dtype), cell, batch.index_select(0, i))
    # index_select, not positions[j]: the backward of advanced indexing (index_put with
    # accumulate) dominated a whole MD step on the GPU at large sizes; index_select's is index_add
    return positions.index_select(0, j) - positions.index_select(0, i) + shift_vec


def vector_times_matrix(v: torch.Tensor, matrices: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Row m of the result is v[m] @ matrices[index[m]]: v [M, 3], matrices [G, 3, 3], index [M] → [M, 3].

    Written elementwise, so one structure (G = 1, broadcast, its gradient a plain reduction) and a
    batch (gathered matrices) give bit-identical rows, and no [M, 3, 3] gather is made for G = 1.
    """
    m = matrices[0] if matrices.shape[0] == 1 else matrices.index_select(0, index)  # [3, 3] or [M, 3, 3]
    return (v[:, 0:1] * m[..., 0, :] + v[:, 1:2] * m[..., 1, :]) + v[:, 2:3] * m[..., 2, :]
