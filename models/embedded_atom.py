"""The embedded-atom term on its own, as an architecture (``embedded_atom``).

A baseline for the two transformers, and the first stage of their recipes on metals: trained alone
(cheap), it is then carried into a transformer that declares the term (``terms: {embedded_atom: ...}``)
by the training option ``init_embedded_atom_from`` (:class:`mlip.training.TrainConfig`), which trains
the transformer on top of the fitted term.
"""

from __future__ import annotations

import torch

from mlip.models.base import EnergyModel
from mlip.nn import EmbeddedAtomEnergy


class EmbeddedAtomModel(EnergyModel):
    """Per-atom energies E_i = :class:`mlip.nn.EmbeddedAtomEnergy` (a learned function of
    atom i's element and its element-resolved neighbor densities), with the model interface of
    :mod:`mlip.models`.

    Args:
        num_species: number of elements.
        cutoff: r_c (Å).
        num_radial, num_densities, hidden, envelope_exponent, avg_neighbors, log_densities: those of
            :class:`~mlip.nn.EmbeddedAtomEnergy`; ``init_embedded_atom_from`` needs the
            same values as the term declared beside the transformer.
    """

    def __init__(self, num_species: int, cutoff: float, num_radial: int = 16, num_densities: int = 16,
                 hidden: int = 64, envelope_exponent: int = 5, avg_neighbors: float = 32.0,
                 log_densities: bool = False):
        super().__init__()
        self.embedded_atom = EmbeddedAtomEnergy(num_species, cutoff, num_radial, num_densities, hidden,
                                                envelope_exponent, avg_neighbors, log_densities)

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor,
                batch: torch.Tensor, n_graphs: int) -> torch.Tensor:
        """species [N], edge_index [2, E] (i ← j), edge_vectors [E, 3] → energies [N]."""
        return self.embedded_atom(species, edge_index, edge_vectors)
