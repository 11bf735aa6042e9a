"""Element-resolved sums over each atom's neighbors: the common input of the neighbor densities."""

from __future__ import annotations

import torch


def element_resolved_sums(species: torch.Tensor, edge_index: torch.Tensor, values: torch.Tensor,
                          num_species: int) -> torch.Tensor:
    """Σ_{j≠i} onehot(Z_j) ⊗ values_ij per atom: species [N], edge_index [2, E] (i ← j, no self edges),
    values [E, R] → [N, S·R] (S = num_species; the block of element s holds the sum over neighbors of
    element s)."""
    n, r = species.shape[0], values.shape[1]
    i, j = edge_index[0], edge_index[1]
    sums = values.new_zeros((n * num_species, r))
    sums = sums.index_add(0, i * num_species + species.index_select(0, j), values)
    return sums.view(n, num_species * r)
