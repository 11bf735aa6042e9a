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
        # The first layer on [rbf; e_src[Z_j]; e_tgt[Z_i]] is W_rbf·rbf + (W_src·e_src + b)[Z_j]
        # + (W_tgt·e_tgt)[Z_i]: the embedding parts are tables [num_embeddings, width] gathered per edge,
        # so the per-edge matmul has R inputs instead of R + 2·edge_channels and no concatenation is built.
        first = self.mlp[0]
        r, c = rbf.shape[1], self.source_embedding.weight.shape[1]
        w_rbf, w_src, w_tgt = torch.split(first.weight.to(rbf.dtype), [r, c, c], dim=1)
        src = torch.nn.functional.linear(self.source_embedding.weight.to(rbf.dtype), w_src,
                                         first.bias.to(rbf.dtype))
        tgt = torch.mm(self.target_embedding.weight.to(rbf.dtype), w_tgt.t())
        h = torch.addmm(src.index_select(0, species_src) + tgt.index_select(0, species_tgt), rbf, w_rbf.t())
        return self.mlp[1:](h)
