"""Frame attention over the neighbor graph: softmax (one per frame and head) or linear."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from mlip.nn import envelope_exp, scatter_sum

from .group_linear import GroupLinear
from .groups import RotationGroup
from .rope import FrameRoPE, rotate_pairs


def pair_rotation(cos: torch.Tensor, sin: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The map x [..., F, 2] → Rot(θ)x that turns every channel pair (x0, x1) counter-clockwise by its
    angle θ (cos, sin [..., F]).

    Eagerly it is one complex product e^{iθ}·(x0 + i·x1), a single operation where real arithmetic
    takes six (and many more in the double backward of training). Under ``torch.compile``, whose
    inductor generates no code for complex operators, it is written out in real arithmetic.
    """
    if torch.compiler.is_compiling():
        return lambda x: rotate_pairs(x.flatten(-2), cos, sin).view(x.shape)
    rot = torch.view_as_complex(torch.stack((cos, sin), dim=-1))
    return lambda x: torch.view_as_real(rot * torch.view_as_complex(x.contiguous()))


class FrameAttention(nn.Module):
    """Attention of atom i over its neighbors j (self edge included), independently in every frame.

    For edge e = (i ← j), frame g and head h, with θ from :class:`FrameRoPE`:

    * logits  s_e = q_i · Rot(θ_e) k_j / √D + b_h(|r_e|)   (k ≡ 1 when ``use_key=False``)
    * softmax: w_e = φ(|r_e|) exp(s_e − m_i),  out_i = Σ_e w_e Rot(θ_e) v_j / Σ_e w_e
    * linear:  w_e = φ(|r_e|) s_e,             out_i = Σ_e w_e Rot(θ_e) v_j / Σ_e φ(|r_e|)
    * with ``radial_values``, v_j is replaced by v_j ⊙ (1 + W φ(|r_e|) B(|r_e|)): a per-channel
      filter of the distance (shared over frames, so rotation invariant), W initialised to zero

    φ is the smooth cutoff envelope, multiplied into the weights (not the logits) so that an edge
    enters and leaves with zero weight and the output is C² in positions. m_i is a detached
    per-node shift that cancels exactly (:func:`mlip.nn.envelope_exp`). b_h is a learned function of the distance, shared over
    frames (it is rotation invariant). The self edge keeps Σφ ≥ 1. Both forms cost O(n_edges).
    """

    def __init__(
        self,
        group: RotationGroup,
        channels: int,
        num_heads: int,
        head_dim: int,
        rope_sigma: float,
        num_radial: int,
        attention: str = "softmax",
        use_key: bool = True,
        radial_values: bool = False,
    ):
        super().__init__()
        if attention not in ("softmax", "linear"):
            raise ValueError(f"attention must be 'softmax' or 'linear', got {attention!r}")
        self.attention = attention
        self.num_heads = int(num_heads)
        self.head_dim = int(head_dim)
        self.use_key = bool(use_key)
        self.inv_sqrt_dim = 1.0 / math.sqrt(head_dim)
        inner = num_heads * head_dim
        self.q_proj = GroupLinear(group, channels, inner)
        self.k_proj = GroupLinear(group, channels, inner) if use_key else None
        self.v_proj = GroupLinear(group, channels, inner)
        self.out_proj = GroupLinear(group, inner, channels)
        self.rope = FrameRoPE(num_heads, head_dim, rope_sigma)
        self.radial_bias = nn.Linear(num_radial, num_heads)
        nn.init.zeros_(self.radial_bias.weight)
        nn.init.zeros_(self.radial_bias.bias)
        self.value_filter = nn.Linear(num_radial, inner, bias=False) if radial_values else None
        if self.value_filter is not None:
            nn.init.zeros_(self.value_filter.weight)

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        frame_vec: torch.Tensor,
        radial: torch.Tensor,
        envelope: torch.Tensor,
    ) -> torch.Tensor:
        """x [N, G, C]; edge_index [2, E] (i, j); frame_vec [E, G, 3]; radial [E, R]; envelope [E] → [N, G, C]."""
        n, G, _ = x.shape
        H, F = self.num_heads, self.head_dim // 2
        i, j = edge_index[0], edge_index[1]
        cos, sin = self.rope(frame_vec)  # [E, G, H, F]
        rotate = pair_rotation(cos, sin)  # channel pairs (2f, 2f+1) turned by θ
        q = self.q_proj(x).view(n, G, H, F, 2).index_select(0, i)
        if self.k_proj is not None:
            k = self.k_proj(x).view(n, G, H, F, 2).index_select(0, j)
            logits = (q * rotate(k)).sum((-2, -1))  # q·Rot(θ)k, summed over pairs
        else:  # k ≡ 1: q·Rot(θ)(1, 1) = cos θ (q0 + q1) + sin θ (q1 − q0)
            q0, q1 = q.unbind(-1)
            logits = (cos * (q0 + q1) + sin * (q1 - q0)).sum(-1)
        logits = logits * self.inv_sqrt_dim + self.radial_bias(radial).unsqueeze(1)  # [E, G, H]
        if self.attention == "softmax":
            w = envelope_exp(logits, envelope, i, n)  # φ · exp(z − m), largest term per node 1
            denom = scatter_sum(w, i, n)
        else:
            w = envelope.view(-1, 1, 1) * logits
            denom = scatter_sum(envelope, i, n).view(n, 1, 1)  # broadcasts over frames and heads
        # Weighted rotated values w Rot(θ) v_j.
        v = self.v_proj(x).view(n, G, H, F, 2).index_select(0, j)
        if self.value_filter is not None:
            v = v * (1.0 + self.value_filter(radial)).view(-1, 1, H, F, 2)
        msg = rotate(v) * w[..., None, None]  # [E, G, H, F, 2]
        out = scatter_sum(msg, i, n) / denom[..., None, None]
        return self.out_proj(out.reshape(n, G, H * 2 * F))
