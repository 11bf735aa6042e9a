"""Neighbor-density embedding: how many neighbors of which element sit at which distances."""

from __future__ import annotations

import torch
from torch import nn

from mlip.nn import LogDensities, element_resolved_sums


class NeighborDensityEmbedding(nn.Module):
    """Per-atom invariant ρ_i = W · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) B(r_ij)) / n_avg → [N, C].

    Softmax attention normalises its weights over the neighbors, so the number of neighbors
    reaches an atom only indirectly (through the weight of its self edge against the others), yet
    the energy of a metal depends first of all on that coordination (EAM/EMT embed the atom in
    Σ_j ρ(r_ij)). This sum carries it: a radial basis B [R] (already times the envelope φ, so
    each term enters and leaves smoothly at the cutoff) summed separately for each neighbor
    element, then one linear map (no bias) to the C channels.
    ``avg_neighbors`` only divides the sum to keep it O(1). It is rotation invariant, so adding it
    to the element embedding before the lift over frames keeps the model G-equivariant.

    With ``log_densities`` it adds U · u_i, u_i [D] the positive exponential densities of
    :class:`mlip.nn.LogDensities` on a logarithmic scale (D = ``num_log_densities``, U a
    bias-free D → C map): between a dimer and a bulk atom such a density varies by orders of
    magnitude, and EMT's energy is a function of its logarithm, so on the linear sums alone every
    low-coordinated atom sits in a sliver near 0.
    """

    def __init__(self, num_species: int, num_radial: int, channels: int, avg_neighbors: float = 32.0,
                 log_densities: bool = False, num_log_densities: int = 16):
        super().__init__()
        if avg_neighbors <= 0:
            raise ValueError(f"avg_neighbors must be positive, got {avg_neighbors}")
        self.num_species = int(num_species)
        self.num_radial = int(num_radial)
        self.avg_neighbors = float(avg_neighbors)
        self.linear = nn.Linear(self.num_species * self.num_radial, channels, bias=False)
        self.log_densities = bool(log_densities)
        if self.log_densities:
            #: the logarithmic densities and their map to the C channels
            self.log_density = LogDensities(self.num_species, int(num_log_densities), channels, self.avg_neighbors)

    def densities(self, species: torch.Tensor, edge_index: torch.Tensor, radial: torch.Tensor) -> torch.Tensor:
        """species [N], edge_index [2, E] (i ← j, no self edges), radial [E, R] → [N, S·R] (unscaled sums)."""
        return element_resolved_sums(species, edge_index, radial, self.num_species)

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, radial: torch.Tensor,
                length: torch.Tensor | None = None, envelope: torch.Tensor | None = None) -> torch.Tensor:
        """species [N], edge_index [2, E], radial [E, R] (times the envelope) → [N, C]; with
        ``log_densities`` also the edge lengths [E] and their envelope φ [E]."""
        x = self.linear(self.densities(species, edge_index, radial) / self.avg_neighbors)
        if self.log_densities:
            if length is None or envelope is None:
                raise ValueError("the logarithmic densities need the edge lengths and their envelope")
            x = x + self.log_density(species, edge_index, length, envelope)
        return x

    def extra_repr(self) -> str:
        return (f"species={self.num_species}, radial={self.num_radial}, avg_neighbors={self.avg_neighbors}, "
                f"log_densities={self.log_densities}")
