"""The Platonic Transformer energy model."""

from __future__ import annotations

import torch
from torch import nn

from mlip.radial import BesselBasis, PolynomialEnvelope

from .attention import FrameAttention
from .block import PlatonicBlock
from .density import NeighbourDensityEmbedding
from .group_linear import GroupLinear
from .groups import get_group
from .rope import frame_vectors


class PlatonicTransformer(nn.Module):
    """Platonic Transformer (arXiv 2510.03511) as a local, size-extensive energy model.

    Every atom carries a function on a finite rotation group G: features [N, G, C], one C-vector
    per frame R_g. All linear maps are group convolutions (:class:`GroupLinear`), so features
    permute among frames when the input is rotated by an element of G. Geometry enters only
    through frame RoPE of relative edge vectors (periodic shift included) and a radial bias, inside
    attention restricted to the neighbour graph with a smooth envelope (and, optionally, a
    distance filter on the attention values and a rotation-invariant neighbour density added to
    the element embedding). The per-atom energy is
    the mean over frames of a per-frame readout, so the energy is *exactly* invariant to G,
    translations and permutations, and only approximately to other rotations.

    Args:
        num_species: size of the element embedding.
        cutoff: radius of the neighbour graph (Å).
        group: ``"tetrahedral"`` (12), ``"octahedral"`` (24) or ``"icosahedral"`` (60).
        channels: feature channels per frame C (total width G·C).
        num_layers: number of transformer blocks.
        num_heads: attention heads per frame H.
        head_dim: channels per head D (even; RoPE rotates D/2 pairs).
        ffn_multiplier: hidden width of the feed-forward network in units of C.
        rope_sigma: standard deviation of the initial RoPE frequencies (Å⁻¹).
        num_radial: size of the radial basis used for the attention bias.
        attention: ``"softmax"`` or ``"linear"``.
        use_key: learned keys (otherwise k ≡ 1).
        envelope_exponent: p of the polynomial cutoff envelope.
        density: add a :class:`NeighbourDensityEmbedding` (element-resolved sums of the enveloped
            radial basis over the neighbours) to the element embedding, so that the model sees
            coordination directly (normalised softmax attention passes it on only indirectly).
        avg_neighbors: the number that divides those sums.
        radial_values: filter the attention values by a learned function of the edge length
            (see :class:`FrameAttention`); otherwise distance enters only the attention weights.
    """

    def __init__(
        self,
        num_species: int,
        cutoff: float,
        group: str = "tetrahedral",
        channels: int = 16,
        num_layers: int = 2,
        num_heads: int = 2,
        head_dim: int = 8,
        ffn_multiplier: int = 4,
        rope_sigma: float = 1.0,
        num_radial: int = 8,
        attention: str = "softmax",
        use_key: bool = True,
        envelope_exponent: int = 5,
        density: bool = False,
        avg_neighbors: float = 32.0,
        radial_values: bool = False,
    ):
        super().__init__()
        g = get_group(group)
        self.group_name = g.name
        self.group_order = g.order
        self.channels = int(channels)
        self.embedding = nn.Embedding(num_species, channels)
        self.envelope = PolynomialEnvelope(cutoff, envelope_exponent)
        self.radial = BesselBasis(cutoff, num_radial)
        self.density = NeighbourDensityEmbedding(num_species, num_radial, channels, avg_neighbors) if density else None
        self.blocks = nn.ModuleList(
            PlatonicBlock(
                g,
                channels,
                FrameAttention(g, channels, num_heads, head_dim, rope_sigma, num_radial, attention, use_key,
                               radial_values),
                ffn_multiplier,
            )
            for _ in range(num_layers)
        )
        self.norm_out = nn.LayerNorm(channels)
        self.readout1 = GroupLinear(g, channels, channels)
        self.readout2 = GroupLinear(g, channels, 1)

    @property
    def frames(self) -> torch.Tensor:
        """[G, 3, 3] group elements R_g in float64 (CPU).

        Deliberately not a buffer: casting the model to float32 and back must not round the
        icosahedral group's irrational entries, so the frames are always taken from the group.
        """
        return get_group(self.group_name).elements

    def forward(
        self,
        species: torch.Tensor,
        edge_index: torch.Tensor,
        edge_vectors: torch.Tensor,
        batch: torch.Tensor,
        n_graphs: int,
    ) -> torch.Tensor:
        """species [N] embedding indices, edge_index [2, E] (i ← j), edge_vectors [E, 3] → energies [N]."""
        n = species.shape[0]
        dtype = edge_vectors.dtype
        # Self edges (i ← i) carry a constant zero vector: no gradient flows through |0|.
        loops = torch.arange(n, device=species.device)
        edges = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
        vec = torch.cat([edge_vectors, edge_vectors.new_zeros((n, 3))], dim=0)
        sq = (vec * vec).sum(-1)
        nonzero = sq > 0
        length = torch.sqrt(torch.where(nonzero, sq, torch.ones_like(sq)))
        length = torch.where(nonzero, length, torch.zeros_like(length))
        envelope = self.envelope(length)
        radial = self.radial(length) * envelope.unsqueeze(-1)
        frame_vec = frame_vectors(self.frames.to(vec.device), vec)

        x = self.embedding(species).to(dtype)
        if self.density is not None:
            x = x + self.density(species, edge_index, radial[: edge_index.shape[1]])
        x = x.unsqueeze(1).expand(n, self.group_order, self.channels)
        for block in self.blocks:
            x = block(x, edges, frame_vec, radial, envelope)
        e = self.readout2(torch.nn.functional.gelu(self.readout1(self.norm_out(x))))  # [N, G, 1]
        return e.mean(dim=(1, 2))
