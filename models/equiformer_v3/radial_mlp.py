"""Per-edge MLP on the radial basis and the two atoms' edge embeddings."""

from __future__ import annotations

import math
from typing import List, Sequence

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

    def first_layer(self, rbf: torch.Tensor):
        """The first linear layer as (W_rbf [width, R], source table [num_embeddings, width] with the bias,
        target table [num_embeddings, width]): on [rbf; e_src[Z_j]; e_tgt[Z_i]] it is
        W_rbf·rbf + (W_src·e_src + b)[Z_j] + (W_tgt·e_tgt)[Z_i], the embedding parts gathered per edge
        from tables, so the per-edge matmul has R inputs instead of R + 2·edge_channels."""
        first = self.mlp[0]
        r, c = rbf.shape[1], self.source_embedding.weight.shape[1]
        w_rbf, w_src, w_tgt = torch.split(first.weight.to(rbf.dtype), [r, c, c], dim=1)
        src = torch.nn.functional.linear(self.source_embedding.weight.to(rbf.dtype), w_src,
                                         first.bias.to(rbf.dtype))
        return w_rbf, src, torch.mm(self.target_embedding.weight.to(rbf.dtype), w_tgt.t())

    def forward(self, rbf: torch.Tensor, species_src: torch.Tensor, species_tgt: torch.Tensor) -> torch.Tensor:
        return edge_mlps([self], rbf, species_src, species_tgt)[0]


def edge_mlps(mlps: Sequence[EdgeMLP], rbf: torch.Tensor, species_src: torch.Tensor,
              species_tgt: torch.Tensor) -> List[torch.Tensor]:
    """Several :class:`EdgeMLP` s of one shape on the same edges, evaluated together: [E, widths[-1]] each.

    The model's edge MLPs (the edge-degree embedding's and every attention layer's) differ only in
    their weights, so up to their last layer they run as one: the first layer as one matmul over the
    stacked weights, the middle one as one batched matmul, and each layer norm and SiLU once over all
    of them (the normalisation is per MLP; the affine maps are applied stacked). Fewer and larger
    operations than one MLP after another, which the double backward of training multiplies.
    """
    k, layers = len(mlps), len(mlps[0].mlp)  # Linear, then (LayerNorm, SiLU, Linear) per hidden layer
    parts = [m.first_layer(rbf) for m in mlps]
    w_rbf, src, tgt = (torch.cat(p, dim=0 if n == 0 else 1) for n, p in enumerate(zip(*parts)))
    h = torch.addmm(src.index_select(0, species_src) + tgt.index_select(0, species_tgt), rbf, w_rbf.t())
    e, width = h.shape[0], h.shape[1] // k
    if layers == 1:
        return list(h.split(width, dim=1))
    h = h.view(e, k, width).transpose(0, 1).contiguous()  # [k, E, width]
    for depth in range(1, layers, 3):
        norm = [m.mlp[depth] for m in mlps]
        weight = torch.stack([n.weight for n in norm]).to(rbf.dtype)[:, None, :]
        bias = torch.stack([n.bias for n in norm]).to(rbf.dtype)[:, None, :]
        h = torch.nn.functional.layer_norm(h, (width,), eps=norm[0].eps)
        h = torch.nn.functional.silu(torch.addcmul(bias, h, weight))
        if depth + 2 < layers - 1:  # a hidden linear layer: one batched matmul over the MLPs
            linear = [m.mlp[depth + 2] for m in mlps]
            weight = torch.stack([lin.weight for lin in linear]).to(rbf.dtype).transpose(1, 2)
            h = torch.baddbmm(torch.stack([lin.bias for lin in linear]).to(rbf.dtype)[:, None, :], h, weight)
            width = h.shape[2]
    return [m.mlp[-1](h[n]) for n, m in enumerate(mlps)]
