"""A radius of attention shorter than the neighbor graph's cutoff, for the models whose cheap per-atom
sums (neighbor densities, the embedded-atom term) reach further than their attention."""

from __future__ import annotations

from typing import Optional, Tuple

import torch


def resolve_attention_cutoff(attention_cutoff: Optional[float], cutoff: float) -> Optional[float]:
    """The attention radius (Å) to filter edges by, or ``None`` when attention uses every edge
    (``attention_cutoff`` ``None`` or equal to ``cutoff``). ValueError for a radius outside (0, cutoff]."""
    if attention_cutoff is None:
        return None
    attention_cutoff = float(attention_cutoff)
    if not 0.0 < attention_cutoff <= cutoff:
        raise ValueError(f"attention_cutoff must lie in (0, cutoff = {cutoff}], got {attention_cutoff}")
    if attention_cutoff == cutoff:
        return None
    return attention_cutoff


def require_edges_beyond_attention(attention_cutoff: float, cutoff: float, used: bool, needs: str) -> None:
    """ValueError when ``attention_cutoff`` < ``cutoff`` but nothing uses the edges beyond it (``used``
    false; ``needs`` names what would)."""
    if attention_cutoff < cutoff and not used:
        raise ValueError(f"attention_cutoff < cutoff is useful only with {needs}: the edges beyond "
                         "attention_cutoff would reach nothing")


def edge_indices_within(edge_vectors: torch.Tensor, radius: float) -> torch.Tensor:
    """Indices [E'] (increasing) of the edges shorter than ``radius``: edge_vectors [E, 3]."""
    return torch.nonzero((edge_vectors * edge_vectors).sum(-1) < radius**2).squeeze(1)


def edges_within(edge_index: torch.Tensor, edge_vectors: torch.Tensor, radius: float,
                 keep: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The edges shorter than ``radius``: edge_index [2, E], edge_vectors [E, 3] → [2, E'], [E', 3].

    ``keep`` [E']: their indices (:func:`edge_indices_within`) when the caller has selected them
    already. The compiled calculator does, eagerly, so that no shape inside its compiled graph depends
    on the data (mlip.calculators.compiled_network)."""
    if keep is None:
        keep = edge_indices_within(edge_vectors, radius)
    return edge_index.index_select(1, keep), edge_vectors.index_select(0, keep)
