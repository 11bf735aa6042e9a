"""Periodic images of atoms, shared by the cell-list searches (PyTorch and CUDA): every lattice
translation of an atom that can bring it within the search radius of its cell."""

from __future__ import annotations

import torch

Tensor = torch.Tensor


def mat_rows(v: Tensor, m: Tensor) -> Tensor:
    """``v @ m`` per row, elementwise: v [M, 3], m [M, 3, 3] or [3, 3] -> [M, 3]."""
    if m.dim() == 2:
        return (v[:, 0:1] * m[0] + v[:, 1:2] * m[1]) + v[:, 2:3] * m[2]
    return (v[:, 0:1] * m[:, 0] + v[:, 1:2] * m[:, 1]) + v[:, 2:3] * m[:, 2]


# Bin layout of the torch cell list: x and y bins of edge rc / _NSUB (a centre looks at
# (2 * _NSUB + 1)^2 "rows" of bins, pruned by their distance to the centre); z bins of edge
# rc / _NZ, so that each row query is one contiguous key range trimmed to the sphere.
_NSUB = 2
_NZ = 8


def periodic_images(fw: Tensor, batch: Tensor, reach: Tensor, pbc_d: Tensor, single: bool = False,
                    with_home: bool = False):
    """Every periodic image ("ghost") of every atom that can lie within the search radius of the
    home cell: atom gatom[m] translated by the integer cell shift gshift[m].

    fw [N, 3] wrapped fractional coordinates; batch [N] structure of each atom; reach [G, 3]
    fractional reach r_c·|b_k| (0 along non-periodic axes); pbc_d [G, 3] bool (device);
    ``single``: one structure (scalar reach, faster). Returns (gatom [M] int64, gshift [M, 3] int64),
    ordered by atom, then by shift (S0, S1, S2) lexicographically; with ``with_home`` also
    home [N] int64, the position of each atom's untranslated ghost (S = 0).

    Each atom gets the box of translations t_k in [tmin_k, tmax_k] (a single 0 along non-periodic
    axes), so its ghosts are counted, laid out and decoded with one device-to-host
    synchronisation (the total count) whatever the number of periodic axes.
    """
    dev = fw.device
    n = fw.shape[0]
    if single:
        r = reach[0].to(fw.dtype)
        per = pbc_d[0].expand(n, 3)
    else:
        r = reach[batch].to(fw.dtype)
        per = pbc_d[batch]
    tmin = torch.where(per, torch.ceil(-r - fw), torch.zeros_like(fw)).long()  # [N, 3]
    tmax = torch.where(per, torch.floor((1.0 + r) - fw), torch.zeros_like(fw)).long()
    cnt = (tmax - tmin + 1).clamp_min(0)  # [N, 3]
    per_atom = cnt.prod(1)
    ends = torch.cumsum(per_atom, 0)
    total = int(ends[-1]) if n else 0
    start = ends - per_atom
    gatom = torch.repeat_interleave(torch.arange(n, device=dev), per_atom, output_size=total)
    u = torch.arange(total, device=dev) - start[gatom]  # local index, S2 fastest
    c1, c2 = cnt[gatom, 1], cnt[gatom, 2]
    t2 = u % c2
    u = torch.div(u, c2, rounding_mode="floor")
    t1 = u % c1
    t0 = torch.div(u, c1, rounding_mode="floor")
    gshift = torch.stack([t0, t1, t2], 1) + tmin[gatom]
    if not with_home:
        return gatom, gshift
    home = start + ((-tmin[:, 0]) * cnt[:, 1] - tmin[:, 1]) * cnt[:, 2] - tmin[:, 2]
    return gatom, gshift, home
