"""The Platonic Transformer energy model."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from mlip.models.base import EnergyModel
from mlip.nn import BesselBasis, PolynomialEnvelope, edges_within, resolve_attention_cutoff, safe_length

from .attention import FrameAttention
from .block import PlatonicBlock
from .density import NeighborDensityEmbedding
from .group_linear import GroupLinear
from .groups import GROUP_ALIASES, coset_representatives, get_group
from .orientation import ORIENTATIONS, orientation_matrix
from .rope import frame_vectors


class PlatonicTransformer(EnergyModel):
    """Platonic Transformer (arXiv 2510.03511) as a local, size-extensive energy model.

    Every atom carries a function on a finite rotation group G: features [N, G, C], one C-vector
    per frame R_g. All linear maps are group convolutions (:class:`GroupLinear`), so features
    permute among frames when the input is rotated by an element of G. Geometry enters only
    through frame RoPE of relative edge vectors (periodic shift included) and a radial bias, inside
    attention restricted to the neighbor graph with a smooth envelope (and, optionally, a
    distance filter on the attention values and a rotation-invariant neighbor density added to
    the element embedding). The per-atom energy is
    the mean over frames of a per-frame readout, so the energy is *exactly* invariant to G,
    translations and permutations, and only approximately to other rotations. The group may be turned
    as a whole by a fixed rotation R₀ (``orientation``; frames R₀R_g, exact invariance to R₀GR₀ᵀ), so
    that its axes do not coincide with those of crystals as files give them. With ``average_over`` a
    larger group S ⊃ G, the energy is the mean of the network over the K = |S|/|G| cosets c_k·G of G in S
    (frames R₀c_kR_g, shared weights): exactly invariant to R₀SR₀ᵀ, at K times the cost.

    Args:
        num_species: size of the element embedding.
        cutoff: radius of the neighbor graph (Å).
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
        density: add a :class:`NeighborDensityEmbedding` (element-resolved sums of the enveloped
            radial basis over the neighbors) to the element embedding, so that the model sees
            coordination directly (normalised softmax attention passes it on only indirectly).
        avg_neighbors: the number that divides those sums.
        attention_cutoff: radius of attention (Å), at most ``cutoff``; ``None`` means ``cutoff``. With
            ``density`` on (or an energy term declared beside the network, :mod:`mlip.terms`), a smaller
            value lets the cheap density sums reach further than attention:
            the neighbor graph (and the density embedding, with its own basis and envelope) extends to
            ``cutoff``, while attention, whose cost is per edge and frame, uses only the edges shorter
            than ``attention_cutoff`` (its envelope vanishes there, so the energy stays smooth).
        orientation: where the group points, ``"generic"`` (a fixed rotation R₀ unrelated to crystal
            axes; frames R₀R_g) or ``"aligned"`` (R₀ = I). See :mod:`.orientation`: with the group
            aligned with the Cartesian axes, crystals as files give them sit in the one orientation
            that rotation-augmented training never sees. Checkpoints written before this option load
            as ``"aligned"`` (:attr:`LEGACY_HYPERPARAMETERS`).
        radial_values: filter the attention values by a learned function of the edge length
            (see :class:`FrameAttention`); otherwise distance enters only the attention weights.
        density_log_densities: the density embedding also adds such densities on a logarithmic scale
            (``log_densities`` of :class:`NeighborDensityEmbedding`), inside the network rather than as
            a separate energy term; needs ``density``.
        average_over: ``None``, or a group containing ``group`` (``"octahedral"`` or ``"icosahedral"``
            for the tetrahedral group): average the energy over its cosets, as the design notes'
            remedy for the rotation error of a finite group (5 cosets of T in I; 2 of T in O). The
            weights do not depend on it, so a trained model may be evaluated either way.
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
        attention_cutoff: float | None = None,
        orientation: str = "generic",
        density_log_densities: bool = False,
        average_over: str | None = None,
    ):
        super().__init__()
        if orientation not in ORIENTATIONS:
            raise ValueError(f"unknown orientation {orientation!r}; accepted: {', '.join(ORIENTATIONS)}")
        self.orientation = orientation
        if average_over is not None:
            average_over = GROUP_ALIASES.get(average_over, average_over)
            try:
                coset_representatives(get_group(group).name, average_over)
            except (KeyError, ValueError) as err:
                raise ValueError(f"average_over {average_over!r}: {err}") from None
        self.average_over = average_over
        cutoff = float(cutoff)
        attention_cutoff = resolve_attention_cutoff(attention_cutoff, cutoff)
        self.cutoff = cutoff
        #: radius of attention (Å); edges between it and ``cutoff`` feed only the density embedding (and
        #: the potential's terms)
        self.attention_cutoff = cutoff if attention_cutoff is None else attention_cutoff
        #: whether the network uses the edges beyond ``attention_cutoff`` (its FAR_EDGES_OPTION is on)
        self.uses_far_edges = bool(density)
        g = get_group(group)
        self.group_name = g.name
        self.group_order = g.order
        self.channels = int(channels)
        self.embedding = nn.Embedding(num_species, channels)
        self.envelope = PolynomialEnvelope(self.attention_cutoff, envelope_exponent)
        self.radial = BesselBasis(self.attention_cutoff, num_radial)
        if density_log_densities and not density:
            raise ValueError("density_log_densities needs density: true")
        self.density = (NeighborDensityEmbedding(num_species, num_radial, channels, avg_neighbors,
                                                  log_densities=density_log_densities) if density else None)
        if attention_cutoff is None or not density:  # one basis and envelope for both
            self.density_envelope, self.density_radial = None, None
        else:
            self.density_envelope = PolynomialEnvelope(cutoff, envelope_exponent)
            self.density_radial = BesselBasis(cutoff, num_radial)
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

    def final_readout(self) -> nn.Module:
        """The last layer of the readout (its output, averaged over frames, is the network's energy);
        zeroing it makes the network's output zero, leaving the potential's terms
        (``init_embedded_atom_from``)."""
        return self.readout2

    #: hyperparameters that checkpoints written before they existed lack, with the value that
    #: reproduces those checkpoints (a new model gets the signature's default instead)
    LEGACY_HYPERPARAMETERS = {"orientation": "aligned"}

    #: the option that makes the network use the edges beyond ``attention_cutoff``
    FAR_EDGES_OPTION = "density=True"

    @property
    def cosets(self) -> torch.Tensor:
        """[K, 3, 3] float64: the coset representatives c_k of the group in ``average_over`` (the
        identity alone, K = 1, without it)."""
        if self.average_over is None:
            return torch.eye(3, dtype=torch.float64).unsqueeze(0)
        return coset_representatives(self.group_name, self.average_over)

    @property
    def frames(self) -> torch.Tensor:
        """[K, G, 3, 3] frames R₀c_kR_g in float64 (CPU): the group elements R_g, in each coset c_k of
        ``average_over`` (K = 1 without it), turned by the orientation R₀.

        Deliberately not a buffer: casting the model to float32 and back must not round the
        icosahedral group's irrational entries, so the frames are always taken from the group.
        """
        elements = self.cosets.unsqueeze(1) @ get_group(self.group_name).elements.unsqueeze(0)
        if self.orientation == "aligned":
            return elements
        return orientation_matrix(self.orientation) @ elements

    def frames_as(self, dtype: torch.dtype, device) -> torch.Tensor:
        """:attr:`frames` cast to ``dtype`` on ``device`` [K, G, 3, 3], computed once per group,
        orientation, averaging group, dtype and device (the float64 frames cast, as every call cast
        them before); for the forward pass only: callers must not modify it."""
        key = (self.group_name, self.orientation, self.average_over, dtype, torch.device(device))
        cache = self.__dict__.setdefault("_frames_cache", {})
        if key not in cache:
            cache[key] = self.frames.to(device=device, dtype=dtype)
        return cache[key]

    @property
    def invariant_rotations(self) -> torch.Tensor:
        """[n, 3, 3] the rotations R₀SR₀ᵀ (float64) under which the energy is exactly invariant, S the
        elements of the group (n = G; rotating the input by one permutes the frames) or of
        ``average_over`` (rotating the input permutes the cosets' frames); S itself when aligned."""
        elements = get_group(self.average_over or self.group_name).elements
        if self.orientation == "aligned":
            return elements
        r0 = orientation_matrix(self.orientation)
        return r0 @ elements @ r0.T

    def forward(
        self,
        species: torch.Tensor,
        edge_index: torch.Tensor,
        edge_vectors: torch.Tensor,
        batch: torch.Tensor,
        n_graphs: int,
        attention_edges: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """species [N] embedding indices, edge_index [2, E] (i ← j), edge_vectors [E, 3] → energies [N].
        ``attention_edges`` [E']: the indices of the edges shorter than ``attention_cutoff`` when the caller
        has selected them (:func:`mlip.nn.edges_within`'s ``keep``); None: selected here."""
        n = species.shape[0]
        dtype = edge_vectors.dtype
        x = self.embedding(species).to(dtype)
        if self.density_radial is not None:
            # The density sums see every edge of the graph, with their own basis and envelope to `cutoff`;
            # attention below sees only the edges shorter than attention_cutoff.
            sq = (edge_vectors * edge_vectors).sum(-1)
            length = safe_length(sq)
            density_envelope = self.density_envelope(length)
            radial = self.density_radial(length) * density_envelope.unsqueeze(-1)
            x = x + self.density(species, edge_index, radial, length, density_envelope)
        if self.attention_cutoff < self.cutoff:
            edge_index, edge_vectors = edges_within(edge_index, edge_vectors, self.attention_cutoff,
                                                     attention_edges)
        # Self edges (i ← i) carry a constant zero vector: no gradient flows through |0|.
        loops = torch.arange(n, device=species.device)
        edges = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
        vec = torch.cat([edge_vectors, edge_vectors.new_zeros((n, 3))], dim=0)
        length = safe_length((vec * vec).sum(-1))
        envelope = self.envelope(length)
        radial = self.radial(length) * envelope.unsqueeze(-1)
        if self.density is not None and self.density_radial is None:
            m = edge_index.shape[1]
            x = x + self.density(species, edge_index, radial[:m], length[:m], envelope[:m])
        x0 = x.unsqueeze(1).expand(n, self.group_order, self.channels)
        energy = 0.0
        frame_sets = self.frames_as(vec.dtype, vec.device)  # [K, G, 3, 3]: one set per coset
        for frames in frame_sets:
            frame_vec = frame_vectors(frames, vec)
            x = x0
            for block in self.blocks:
                x = block(x, edges, frame_vec, radial, envelope)
            e = self.readout2(torch.nn.functional.gelu(self.readout1(self.norm_out(x))))  # [N, G, 1]
            energy = energy + e.mean(dim=(1, 2))
        return energy / frame_sets.shape[0]
