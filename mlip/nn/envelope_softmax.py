"""Softmax numerators with a smooth cutoff envelope, safe in float32."""

from __future__ import annotations

import torch

from mlip.nn.scatter import scatter_max


def envelope_exp(logits: torch.Tensor, envelope: torch.Tensor, index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """φ_e · exp(z_e − m_i) for every edge e → i, the numerator of a softmax with the envelope φ
    multiplied into the weights.

    The shift m_i = max over i's edges of (z_e + log φ_e) is detached and cancels exactly in any
    ratio of these numerators; taking it over the envelope-weighted terms (not over z alone) makes
    the largest numerator of every node exactly 1. With m_i = max z, a large logit on an edge near
    the cutoff (φ ≈ 0) pushes every other term towards exp(−100) and below: in float32 they underflow
    and the softmax becomes noise (a trained model's forces were wrong by orders of magnitude).

    Edges with φ = 0 give exactly 0, with zero gradient. Shapes: logits [E, ...], envelope [E] →
    [E, ...].
    """
    env = envelope.reshape(envelope.shape + (1,) * (logits.dim() - envelope.dim()))
    positive = env > 0
    shifted = logits + torch.log(torch.where(positive, env, 1.0))
    m = scatter_max(torch.where(positive, shifted, float("-inf")).detach(), index, num_nodes)
    m = torch.where(torch.isfinite(m), m, 0.0)
    return torch.exp(torch.where(positive, shifted - m.index_select(0, index), float("-inf")))
