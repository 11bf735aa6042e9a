"""Per-edge MLP on the radial basis and the two atoms' edge embeddings."""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import nn


class EdgeMLP(nn.Module):
    """MLP([rbf(d); e_src[Z_j]; e_tgt[Z_i]]) with LayerNorm + SiLU between linear layers.

    The element embeddings are this module's own ([num_embeddings, edge_channels] each,
    initialised U(±1e−3)). Shapes: rbf [E, R], species_src/tgt [E] → [E, widths[-1]].
    """

    def __init__(self, num_radial: int, num_embeddings: int, edge_channels: int, widths: Sequence[int]):
        super().__init__()
        self.source_embedding = nn.Embedding(num_embeddings, edge_channels)
        self.target_embedding = nn.Embedding(num_embeddings, edge_channels)
        nn.init.uniform_(self.source_embedding.weight, -1e-3, 1e-3)
        nn.init.uniform_(self.target_embedding.weight, -1e-3, 1e-3)
        dims = [num_radial + 2 * edge_channels] + list(widths)
        layers = []
        for k, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            linear = nn.Linear(a, b)
            bound = 1.0 / math.sqrt(a)
            nn.init.uniform_(linear.weight, -bound, bound)
            nn.init.zeros_(linear.bias)
            layers.append(linear)
            if k < len(dims) - 2:
                layers += [nn.LayerNorm(b), nn.SiLU()]
        self.mlp = nn.Sequential(*layers)

    def forward(self, rbf: torch.Tensor, species_src: torch.Tensor, species_tgt: torch.Tensor) -> torch.Tensor:
        h = torch.cat(
            [rbf, self.source_embedding(species_src).to(rbf.dtype), self.target_embedding(species_tgt).to(rbf.dtype)],
            dim=-1,
        )
        return self.mlp(h)
