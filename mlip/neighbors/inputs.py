"""The arguments every neighbour-list backend takes, validated and prepared the same way.

Positions, cutoff and ``pbc`` are checked (one-line ``ValueError`` naming the problem); cells are
completed (:func:`complete_cells`: the rows of non-periodic directions replaced by unit vectors
orthogonal to the periodic ones, so that every cell is invertible); :func:`search_cutoff` is the
slightly enlarged radius all backends search with, so that their exact final filter
(:func:`mlip.neighbors.edges.finalize_edges`) never misses a pair. :func:`prepare_single` and
:func:`prepare_batch` do all of it for one structure or a batch.
"""

from __future__ import annotations

import math
from typing import Sequence, Tuple, Union

import torch

Tensor = torch.Tensor
PbcLike = Union[Tensor, Sequence[bool], bool]

# Relative squared-volume threshold below which periodic lattice vectors count as dependent.
_DEGENERATE_TOL = 1e-12


def as_pbc(pbc: PbcLike, n_graphs: int | None) -> Tensor:
    """Convert ``pbc`` to a CPU bool tensor of shape [3] (``n_graphs`` None) or [n_graphs, 3]."""
    t = torch.as_tensor(pbc).detach().to("cpu")
    if t.dtype != torch.bool:
        t = t != 0
    if n_graphs is None:
        if t.dim() == 0:
            t = t.expand(3)
        if t.shape != (3,):
            raise ValueError(f"pbc must have shape [3], got {tuple(t.shape)}")
    else:
        if t.dim() == 0:
            t = t.expand(n_graphs, 3)
        elif t.dim() == 1 and t.shape[0] == 3:
            t = t.expand(n_graphs, 3)
        if t.shape != (n_graphs, 3):
            raise ValueError(f"pbc must have shape [{n_graphs}, 3], got {tuple(t.shape)}")
    return t.clone()


def check_positions(positions: Tensor) -> None:
    """ValueError (TypeError) unless ``positions`` is a finite floating-point tensor [n_atoms, 3]."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError("positions must be a torch.Tensor")
    if positions.dim() != 2 or positions.shape[1] != 3:
        raise ValueError(f"positions must have shape [n_atoms, 3], got {tuple(positions.shape)}")
    if not positions.dtype.is_floating_point:
        raise ValueError(f"positions must be floating point, got {positions.dtype}")
    if positions.numel() > 0 and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions contain NaN or inf")


def check_cutoff(cutoff) -> float:
    """``cutoff`` as a float; ValueError unless it is positive and finite."""
    cutoff = float(cutoff)
    if not math.isfinite(cutoff) or cutoff <= 0.0:
        raise ValueError(f"cutoff must be a positive finite number, got {cutoff}")
    return cutoff


def det3(m: Tensor) -> Tensor:
    """Determinants of [..., 3, 3] matrices by the rule of Sarrus (elementwise: for a batch of many
    small matrices on the CPU, far cheaper than one LAPACK call per matrix)."""
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    d, e, f = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    g, h, i = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)


def inv3(m: Tensor) -> Tensor:
    """Inverses of invertible [..., 3, 3] matrices (adjugate over determinant, elementwise)."""
    r0, r1, r2 = m[..., 0, :], m[..., 1, :], m[..., 2, :]
    # columns of the inverse are the cross products of the rows, over the determinant
    adj = torch.stack([torch.cross(r1, r2, dim=-1), torch.cross(r2, r0, dim=-1),
                       torch.cross(r0, r1, dim=-1)], -1)
    return adj / det3(m)[..., None, None]


def complete_cells(cell: Tensor, pbc: Tensor) -> Tuple[Tensor, Tensor]:
    """Validate cells and replace the rows of non-periodic directions.

    Args:
        cell: [n_graphs, 3, 3] lattice vectors as rows (any dtype/device).
        pbc: [n_graphs, 3] bool (CPU).

    Returns:
        ``(full, masked)``, both [n_graphs, 3, 3] float64 on CPU. ``full`` keeps the periodic
        rows and has unit vectors orthogonal to the periodic ones (positively oriented when
        some direction is non-periodic) in the non-periodic rows; it is always invertible.
        ``masked`` is ``cell`` with the non-periodic rows set to zero (used in the exact
        distance filter, so anything stored in non-periodic rows is ignored).

    Raises:
        ValueError: periodic lattice vectors that are zero, non-finite or linearly dependent.
    """
    c = cell.detach().to("cpu", torch.float64)
    if c.dim() != 3 or c.shape[1:] != (3, 3):
        raise ValueError(f"cell must have shape [3, 3] (or [n_graphs, 3, 3]), got {tuple(cell.shape)}")
    if c.shape[0] == 0:
        return c.clone(), c.clone()
    pm = pbc[:, :, None]
    masked = torch.where(pm, c, torch.zeros_like(c))
    if not bool(torch.isfinite(masked).all()):
        raise ValueError("periodic cell vectors contain NaN or inf")
    norms2 = (masked * masked).sum(-1)  # [G, 3]
    if bool((pbc & (norms2 == 0)).any()):
        raise ValueError("periodic cell has zero volume: a periodic lattice vector is zero")
    # Gram determinant of the periodic rows, normalised by their squared lengths (1 = orthogonal).
    gram = masked @ masked.transpose(1, 2) + torch.diag_embed((~pbc).to(torch.float64))
    ratio = det3(gram) / torch.where(pbc, norms2, torch.ones_like(norms2)).prod(-1)
    if bool((pbc.any(-1) & ~(ratio > _DEGENERATE_TOL)).any()):
        raise ValueError(
            "periodic cell has zero volume: the lattice vectors of the periodic directions "
            "are linearly dependent"
        )
    if bool(pbc.all()):  # nothing to complete (and no SVD, which is costly for a batch)
        return c.clone(), masked
    # Orthonormal complement of the periodic span: right singular vectors of the smallest
    # singular values (exactly zero for the masked rows).
    _, _, vh = torch.linalg.svd(masked)
    npbc = ~pbc
    m = npbc.sum(-1, keepdim=True)  # [G, 1]
    src = (3 - m + torch.cumsum(npbc.long(), -1) - 1).clamp(0, 2)  # [G, 3]
    comp = torch.gather(vh, 1, src[:, :, None].expand(-1, -1, 3))
    full = torch.where(pm, c, comp)
    # Make the completed cell right-handed by flipping the last non-periodic row if needed
    # (irrelevant for correctness, some codes dislike left-handed boxes).
    det = det3(full)
    last_np = torch.where(npbc, torch.arange(3).expand_as(npbc), torch.full_like(npbc, -1, dtype=torch.long))
    last_np = last_np.max(-1).values  # [G], -1 when fully periodic
    flip = (det < 0) & (last_np >= 0)
    if bool(flip.any()):
        sign = torch.ones_like(norms2)
        gi = torch.nonzero(flip).flatten()
        sign[gi, last_np[gi]] = -1.0
        full = full * sign[:, :, None]
    return full, masked


def to_device_async(t: Tensor, device) -> Tensor:
    """Copy a small CPU tensor to ``device`` without a host synchronisation (pinned memory,
    non-blocking; stream-ordered, so later kernels see the data). Identity on CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return t.to(device)
    return t.contiguous().pin_memory().to(device, non_blocking=True)


def search_cutoff(cutoff: float, positions: Tensor, masked_cells: Tensor) -> float:
    """Cutoff used for the candidate search, slightly larger than ``cutoff``.

    The margin covers the rounding errors of the final filter evaluated in the input dtype
    (and of the float64 search), so that no pair with ``d < cutoff`` is ever missed.

    Args:
        cutoff: requested cutoff.
        positions: [n_atoms, 3] input positions (their dtype sets the rounding unit).
        masked_cells: [n_graphs, 3, 3] float64 cells with non-periodic rows zeroed.
    """
    eps = torch.finfo(positions.dtype).eps
    scale = cutoff
    if positions.numel() > 0:
        scale += 3.0 * float(positions.detach().abs().max())
    if masked_cells.numel() > 0:
        scale += float(masked_cells.norm(dim=-1).sum(-1).max())
    return cutoff * (1.0 + 1e-6) + 64.0 * eps * scale + 1e-12



def prepare_single(positions, cell, pbc, cutoff):
    """Validate the single-structure arguments; return (pbc [1,3], full, masked, cutoff)."""
    check_positions(positions)
    cutoff = check_cutoff(cutoff)
    cell = torch.as_tensor(cell)
    if cell.shape != (3, 3):
        raise ValueError(f"cell must have shape [3, 3], got {tuple(cell.shape)}")
    pbc_t = as_pbc(pbc, None)[None]
    full, masked = complete_cells(cell[None], pbc_t)
    return pbc_t, full, masked, cutoff


def prepare_batch(positions, cell, pbc, batch, cutoff):
    """Validate batched arguments; return (pbc [G,3], full, masked, batch, counts, cutoff)."""
    check_positions(positions)
    cutoff = check_cutoff(cutoff)
    cell = torch.as_tensor(cell)
    if cell.dim() == 2:
        cell = cell[None]
    if cell.dim() != 3 or cell.shape[1:] != (3, 3):
        raise ValueError(f"cell must have shape [n_graphs, 3, 3], got {tuple(cell.shape)}")
    n_graphs = cell.shape[0]
    pbc_t = as_pbc(pbc, n_graphs)
    batch = torch.as_tensor(batch, device=positions.device).long()
    if batch.shape != (positions.shape[0],):
        raise ValueError(f"batch must have shape [{positions.shape[0]}], got {tuple(batch.shape)}")
    if batch.numel() > 0:
        bad = (batch[1:] < batch[:-1]).any() | (batch[0] < 0) | (batch[-1] >= n_graphs)  # one sync
        if bool(bad):
            raise ValueError("batch must be sorted (atoms of a structure contiguous) with values in "
                             "[0, n_graphs)")
    # atoms per structure from the sorted batch (searchsorted: no device-to-host sync, unlike bincount)
    bounds = torch.searchsorted(batch, torch.arange(n_graphs + 1, device=batch.device))
    counts = bounds[1:] - bounds[:-1]
    full, masked = complete_cells(cell, pbc_t)
    return pbc_t, full, masked, batch, counts, cutoff
