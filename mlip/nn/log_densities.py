"""Positive neighbor densities on a logarithmic scale, and :class:`LogDensities`, the module that maps
them to features (used by the embedded-atom term and by the networks' density embeddings)."""

from __future__ import annotations

import math

import torch
from torch import nn

from mlip.nn.neighbor_sums import element_resolved_sums

#: ε of the logarithmic densities, and the rates η_k (Å⁻¹) and centre (Å) of their radial functions
LOG_EPSILON = 1e-4
LOG_RATES = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
LOG_CENTRE = 2.5


def log_densities(species: torch.Tensor, edge_index: torch.Tensor, length: torch.Tensor, envelope: torch.Tensor,
                  rates: torch.Tensor, weights: torch.Tensor, num_species: int, avg_neighbors: float) -> torch.Tensor:
    """D positive densities per atom on a logarithmic scale → u [N, D]:

        σ_i = softplus(V_{Z_i}) · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) g(r_ij)) / n_avg ≥ 0,
        u_i = ln(1 + σ_i / ε) / ln(1 / ε)        (ε = LOG_EPSILON; u = 0 for an atom alone, ≈ 1 in bulk),

    g_k(r) = exp(−η_k (r − LOG_CENTRE)) for the rates η_k of LOG_RATES. species [N], edge_index [2, E]
    (i ← j, no self edges), length [E] and envelope φ [E] of the edges, rates η [K] (the buffer of
    :class:`LogDensities`), weights V [S, S·K, D] (raw; softplus keeps them positive)."""
    rates = rates.to(length.dtype)
    g = torch.exp(-rates * (length.unsqueeze(-1) - LOG_CENTRE)) * envelope.unsqueeze(-1)  # [E, K]
    sums = element_resolved_sums(species, edge_index, g, num_species) / avg_neighbors  # [N, S·K]
    positive = nn.functional.softplus(weights.to(g.dtype)).index_select(0, species)  # [N, S·K, D]
    sigma = torch.bmm(sums.unsqueeze(1), positive).squeeze(1)  # [N, D], ≥ 0
    return torch.log1p(sigma / LOG_EPSILON) / math.log(1.0 / LOG_EPSILON)


class LogDensities(nn.Module):
    """U · u_i → [N, out_features]: the D logarithmic positive densities u_i of :func:`log_densities`
    mapped by a bias-free linear map U (D → ``out_features``).

    Between a dimer and a bulk atom such a density varies by orders of magnitude, and EMT's energy is a
    function of its logarithm; on linear sums alone every low-coordinated atom sits in a sliver near 0.

    Holds the non-persistent buffer ``log_rates`` η [K] (LOG_RATES, in float64 like every derived
    constant, exact in float32 too; it follows the module's device and dtype), the raw weights
    ``weights`` V [S, S·K, D] (softplus(−1.5 ± 0.5) ≈ 0.2 makes σ of a bulk atom O(0.1–1)) and
    ``linear``, the map U. Checkpoints written when these were attributes of the module using them
    (``log_density_weights``, ``log_density_in``) load through :data:`LEGACY_KEYS`.

    Args:
        num_species: S, number of elements.
        num_densities: D, densities per atom.
        out_features: width of the output.
        avg_neighbors: n_avg, divides the sums to keep them O(1).
    """

    def __init__(self, num_species: int, num_densities: int, out_features: int, avg_neighbors: float = 32.0):
        super().__init__()
        if avg_neighbors <= 0:
            raise ValueError(f"avg_neighbors must be positive, got {avg_neighbors}")
        self.num_species = int(num_species)
        self.avg_neighbors = float(avg_neighbors)
        self.register_buffer("log_rates", torch.tensor(LOG_RATES, dtype=torch.float64), persistent=False)
        self.weights = nn.Parameter(torch.randn(self.num_species, self.num_species * len(LOG_RATES),
                                                int(num_densities)) * 0.5 - 1.5)
        self.linear = nn.Linear(int(num_densities), int(out_features), bias=False)

    def densities(self, species: torch.Tensor, edge_index: torch.Tensor, length: torch.Tensor,
                  envelope: torch.Tensor) -> torch.Tensor:
        """u [N, D] from species [N], edge_index [2, E] (i ← j, no self edges), the edge lengths [E]
        and their envelope φ [E]."""
        return log_densities(species, edge_index, length, envelope, self.log_rates, self.weights,
                             self.num_species, self.avg_neighbors)

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, length: torch.Tensor,
                envelope: torch.Tensor) -> torch.Tensor:
        """U · u [N, out_features] (arguments as :meth:`densities`)."""
        return self.linear(self.densities(species, edge_index, length, envelope))

    def extra_repr(self) -> str:
        return f"species={self.num_species}, avg_neighbors={self.avg_neighbors}"


#: state-dict key endings of checkpoints written when the parameters were attributes of the module
#: using them → their names in :class:`LogDensities` (attached as ``log_density``)
LEGACY_KEYS = {"log_density_weights": "log_density.weights", "log_density_in.weight": "log_density.linear.weight"}


def rename_legacy_keys(tensors: dict) -> dict:
    """``tensors`` (a state dict) with the keys of :data:`LEGACY_KEYS` renamed (any prefix kept)."""
    out = {}
    for key, value in tensors.items():
        for old, new in LEGACY_KEYS.items():
            if key == old or key.endswith("." + old):
                key = key[: len(key) - len(old)] + new
                break
        out[key] = value
    return out
