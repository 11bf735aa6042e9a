"""Edge-degree embedding: the initial equivariant features built from each atom's neighbors."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from mlip.kernels.escn_rotation import rotate_scatter

from .radial_mlp import EdgeMLP


class EdgeDegreeEmbedding(nn.Module):
    """x_i += (1/avg_degree) Σ_j w(d_ij) · D_ijᵀ[:, m=0] · MLP(rbf(d_ij), Z_j, Z_i).

    The MLP gives one m = 0 coefficient per (degree, channel) in the edge frame; rotating back with
    the m = 0 columns of the inverse Wigner matrix makes it c_l · Y_l(r̂_ij). The envelope w makes
    the sum smooth at the cutoff. Shapes: → [N, (L + 1)², C].
    """

    def __init__(self, lmax: int, channels: int, edge_channels: int, num_radial: int, num_embeddings: int,
                 avg_degree: float):
        super().__init__()
        self.lmax, self.channels = int(lmax), int(channels)
        self.avg_degree = float(avg_degree)
        self.radial = EdgeMLP(num_radial, num_embeddings, edge_channels,
                              [edge_channels, edge_channels, (lmax + 1) * channels])

    def forward(self, edge_index, species, rbf, envelope, wigner, num_nodes: int,
                radial: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``radial`` [E, (L+1)·C]: the output of ``self.radial`` when the caller evaluated it."""
        i, j = edge_index[0], edge_index[1]
        e = i.shape[0]
        if radial is None:
            radial = self.radial(rbf, species.index_select(0, j), species.index_select(0, i))
        coeff = radial.view(e, self.lmax + 1, self.channels)
        coeff = coeff * envelope[:, None, None]
        # The m = 0 block is the first L + 1 rows of the m-primary layout.
        m0 = torch.split(wigner, [self.lmax + 1, wigner.shape[1] - self.lmax - 1], dim=1)[0]
        return rotate_scatter(m0, coeff, i[None], num_nodes) / self.avg_degree  # Σ_j m0ᵀ coeff: [N, K, C]
