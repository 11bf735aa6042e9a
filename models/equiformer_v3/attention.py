"""Equivariant graph attention of EquiformerV3: eSCN messages, SwiGLU-S², smooth-cutoff softmax."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from mlip.kernels.escn_rotation import gather_rotate, rotate_scatter
from mlip.nn import envelope_exp, scatter_sum
from .activations import EdgeGate, EdgeSwiGLUS2, smooth_leaky_relu
from .radial_mlp import EdgeMLP
from .so2_linear import SO2Linear
from .so3_linear import SO3Linear


def smooth_cutoff_softmax(
    logits: torch.Tensor, envelope: torch.Tensor, centre: torch.Tensor, num_nodes: int, eps: float = 1e-16
) -> torch.Tensor:
    """α_ij = w_ij · w_ij e^{z_ij − m_i} / (Σ_k w_ik e^{z_ik − m_i} + ε), per head.

    The envelope w (C² at the cutoff) multiplies the numerator twice and the denominator once, so
    an edge crossing the cutoff enters both with zero value, slope and curvature: no other weight
    renormalises with a jump. The shift m_i (detached, :func:`mlip.nn.envelope_exp`)
    cancels exactly.
    Shapes: logits [E, H], envelope [E], centre [E] → [E, H].
    """
    ex = envelope_exp(logits, envelope, centre, num_nodes)  # w · exp(z − m), largest term per node 1
    denom = scatter_sum(ex, centre, num_nodes)
    return envelope[:, None] * ex / (denom[centre] + eps)


class EdgeAttention(nn.Module):
    """One attention layer: messages from [x_j ‖ x_i] in the edge frame, weighted and summed over j.

    1. ρ = EdgeMLP(rbf, Z_j, Z_i): one weight per (degree, channel) on [x_j ‖ x_i] (2C channels);
    2. rotate into the edge frame (m-truncated, m-primary) and apply SO2Linear 2C → 2h (or h) with
       H·A + (3h or L·h) invariant scalars;
    3. logits z^h = a_h · SmoothLeakyReLU(LayerNorm(scalars[H, A])), one softmax per head with the
       smooth cutoff inside (:func:`smooth_cutoff_softmax`);
    4. SwiGLU-S² (or gate) → SO2Linear h → H·V, each head scaled by α^h;
    5. rotate back, sum over neighbors, SO3Linear H·V → C.

    Shapes: x [N, K, C] → [N, K, C].
    """

    def __init__(
        self,
        lmax: int,
        mmax: int,
        channels: int,
        num_heads: int,
        alpha_channels: int,
        value_channels: int,
        hidden_channels: int,
        edge_channels: int,
        num_radial: int,
        num_embeddings: int,
        activation: str = "swiglu_s2",
        softmax_eps: float = 1e-16,
    ):
        super().__init__()
        self.lmax, self.mmax = int(lmax), int(mmax)
        self.num_heads, self.alpha_channels, self.value_channels = int(num_heads), int(alpha_channels), int(value_channels)
        self.hidden_channels = int(hidden_channels)
        self.softmax_eps = float(softmax_eps)
        self.radial = EdgeMLP(num_radial, num_embeddings, edge_channels,
                              [edge_channels, edge_channels, (lmax + 1) * 2 * channels])
        if activation == "swiglu_s2":
            act_cls, message_channels = EdgeSwiGLUS2, 2 * hidden_channels
        elif activation == "gate":
            act_cls, message_channels = EdgeGate, hidden_channels
        else:
            raise ValueError(f"unknown activation {activation!r}; use 'swiglu_s2' or 'gate'")
        self.num_logit_scalars = num_heads * alpha_channels
        self.so2_1 = SO2Linear(2 * channels, message_channels, lmax, mmax,
                               extra=self.num_logit_scalars + act_cls.num_scalars(lmax, hidden_channels))
        self.activation = act_cls(lmax, mmax, hidden_channels)
        self.alpha_norm = nn.LayerNorm(alpha_channels)
        self.alpha_dot = nn.Parameter(torch.empty(num_heads, alpha_channels).uniform_(
            -1.0 / alpha_channels**0.5, 1.0 / alpha_channels**0.5))
        self.so2_2 = SO2Linear(hidden_channels, num_heads * value_channels, lmax, mmax)
        self.project = SO3Linear(num_heads * value_channels, channels, lmax)

    def forward(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        species: torch.Tensor,
        rbf: torch.Tensor,
        envelope: torch.Tensor,
        wigner: torch.Tensor,
        radial: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """x [N, K, C]; edge_index [2, E] (centre i, neighbor j); species [N]; rbf [E, R];
        envelope [E]; wigner [E, K_M, K] (edge frame, m-primary rows); ``radial`` [E, (L+1)·2C], the
        output of ``self.radial`` when the caller evaluated it (:func:`.radial_mlp.edge_mlps`) → [N, K, C]."""
        i, j = edge_index[0], edge_index[1]
        n, e = x.shape[0], i.shape[0]
        if radial is None:
            radial = self.radial(rbf, species.index_select(0, j), species.index_select(0, i))
        rho = radial.view(e, self.lmax + 1, 2 * x.shape[2])  # [E, L+1, 2C]
        # [x_j ‖ x_i] gathered and rotated into the edge frame in one step (fused CUDA kernel on GPU).
        msg = gather_rotate(x, wigner, torch.stack([j, i]))  # [E, K_M, 2C]
        msg, scalars = self.so2_1(msg, radial=rho)
        z, act_scalars = torch.split(scalars, [self.num_logit_scalars, scalars.shape[1] - self.num_logit_scalars], 1)
        z = z.reshape(e, self.num_heads, self.alpha_channels)
        z = (smooth_leaky_relu(self.alpha_norm(z)) * self.alpha_dot).sum(dim=-1)  # [E, H]
        alpha = smooth_cutoff_softmax(z, envelope, i, n, self.softmax_eps)
        msg = self.activation(msg, act_scalars)
        value, _ = self.so2_2(msg)  # [E, K_M, H·V]
        k_m = value.shape[1]
        value = (value.view(e, k_m, self.num_heads, self.value_channels) * alpha[:, None, :, None]).flatten(2)
        out = rotate_scatter(wigner, value, i[None], n)  # rotate back and Σ_j: [N, K, H·V]
        return self.project(out)
