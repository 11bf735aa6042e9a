"""The base class of the energy terms a model config may name by import path (:mod:`mlip.terms`)."""

from __future__ import annotations

import torch
from torch import nn


class EnergyTerm(nn.Module):
    """An energy term a potential declares beside its network: per-atom energies from the graph.

    A subclass is built as ``cls(**arguments)`` with, besides the arguments declared in the model config
    (JSON values, every one with a default or given there), whichever of these its ``__init__`` names:

    * ``atomic_numbers``: the potential's elements in embedding order (a list of S ints);
    * ``num_species``: S;
    * ``cutoff``: the potential's cutoff (Å), the longest edge the term sees.

    Weights it registers are stored in checkpoints under ``terms.<name>.``; constants derived from its
    arguments (tables of pair parameters) should be non-persistent (:class:`mlip.derived_constants.
    DerivedConstants`), rebuilt from the arguments the checkpoint's JSON holds. ``__init__`` must also run
    on PyTorch's meta device (a checkpoint's header is checked against its tensors that way, before any
    memory is allocated): read no Python number back from a tensor there.

    Attributes:
        scaled: False (a physical term, the default): the energies are in eV and are added after the
            potential's scale and reference energies, as the ZBL repulsion is. True (a learned term): they
            are in the network's units and added to its output before the scale multiplies it.
    """

    scaled: bool = False

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor
                ) -> torch.Tensor:
        """species [N] (indices into ``atomic_numbers``), edge_index [2, E] (i ← j, every pair in both
        directions), edge_vectors [E, 3] (Å, carrying the gradient to positions and strain) → per-atom
        energies [N]. A term that is a sum over pairs gives each atom half of each of its pairs, and an
        atom with no neighbours nothing (so isolated-atom references stay exact)."""
        raise NotImplementedError(f"{type(self).__name__} must define forward")


__all__ = ["EnergyTerm"]
