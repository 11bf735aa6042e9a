"""Group-convolution linear layer: the weight sharing that makes a dense layer G-equivariant."""

from __future__ import annotations

import math

import torch
from torch import nn

from .groups import RotationGroup


class GroupLinear(nn.Module):
    """Linear map between functions on a finite group G, equivariant to left translation.

    Input x [..., G, C_in] (one C_in-vector per group element, "frame"), output y [..., G, C_out]:

        y_h = Σ_g K[g⁻¹h] x_g + b

    with one kernel K[a] ∈ R^{C_out×C_in} per group element and a bias b ∈ R^{C_out} shared over
    frames. If x'_g = x_{kg} then y'_h = y_{kh}. Parameters: G·C_out·C_in + C_out, exactly 1/G of
    a dense ``nn.Linear(G·C_in, G·C_out)`` (G²·C_out·C_in + G·C_out).

    The dense G·C_out × G·C_in weight is assembled from the kernels on every call (cheap: it is
    small next to the activations) and applied with one matmul.
    """

    def __init__(self, group: RotationGroup, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__()
        G = group.order
        self.group_order = G
        self.in_channels = int(in_channels)
        self.out_channels = int(out_channels)
        self.kernel = nn.Parameter(torch.empty(G, out_channels, in_channels))
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        # index[h, g] = index of g⁻¹h
        index = group.cayley[group.inverse[:, None], torch.arange(G)[None, :]].t().contiguous()
        # cayley[inv[g], h] → row g, column h; transpose to [h, g].
        self.register_buffer("index", index, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fan_in = self.group_order * self.in_channels
        nn.init.normal_(self.kernel, std=1.0 / math.sqrt(fan_in))
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def dense_weight(self) -> torch.Tensor:
        """[G·C_out, G·C_in] equivalent dense weight (g-major on both sides).

        With frozen kernels (``requires_grad`` off, as in a calculator, or no gradient being
        recorded) it is assembled once per state of the kernel (its storage and in-place version)
        and reused: the same tensor, without the operations that assemble it on every call.
        Callers must not modify it.
        """
        kernel = self.kernel
        if torch.compiler.is_compiling() or (kernel.requires_grad and torch.is_grad_enabled()):
            return self.assemble_dense_weight()
        key = (id(kernel), kernel.data_ptr(), kernel._version, kernel.dtype, kernel.device,
               self.index.data_ptr())
        cached = self.__dict__.get("_dense_cache")
        if cached is None or cached[0] != key:
            cached = (key, self.assemble_dense_weight().detach())
            self.__dict__["_dense_cache"] = cached
        return cached[1]

    def assemble_dense_weight(self) -> torch.Tensor:
        """:meth:`dense_weight` assembled from the kernels (differentiable in them)."""
        G, co, ci = self.group_order, self.out_channels, self.in_channels
        # index_select of whole [co, ci] kernels (a row copy each), not kernel[index]: advanced
        # indexing costs several times more, which shows for small structures (same values)
        w = self.kernel.index_select(0, self.index.reshape(-1)).view(G, G, co, ci)  # [h, g, co, ci]
        return w.permute(0, 2, 1, 3).reshape(G * co, G * ci)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., G, C_in] → [..., G, C_out]."""
        G = self.group_order
        lead = x.shape[:-2]
        # the bias, shared over frames, repeated for each and added inside the matmul
        bias = None if self.bias is None else self.bias.repeat(G)
        y = torch.nn.functional.linear(x.reshape(*lead, G * self.in_channels), self.dense_weight(), bias)
        return y.view(*lead, G, self.out_channels)

    def extra_repr(self) -> str:
        return f"G={self.group_order}, in_channels={self.in_channels}, out_channels={self.out_channels}"
