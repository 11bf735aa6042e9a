"""Exponential moving average of model weights."""

from __future__ import annotations

import contextlib
from typing import Dict

import torch
from torch import nn


class ExponentialMovingAverage:
    """shadow ← decay · shadow + (1 − decay) · weights after every optimiser step (floating-point
    parameters only). ``swapped(module)`` temporarily puts the averaged weights in place (for
    validation and for the saved model)."""

    def __init__(self, module: nn.Module, decay: float = 0.999):
        if not 0 <= decay < 1:
            raise ValueError(f"EMA decay must be in [0, 1), got {decay}")
        self.decay = float(decay)
        self.shadow: Dict[str, torch.Tensor] = {
            name: p.detach().clone() for name, p in module.named_parameters() if p.dtype.is_floating_point
        }

    @torch.no_grad()
    def update(self, module: nn.Module) -> None:
        for name, p in module.named_parameters():
            if name in self.shadow:
                self.shadow[name].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)

    @contextlib.contextmanager
    def swapped(self, module: nn.Module):
        params = dict(module.named_parameters())
        saved = {name: params[name].detach().clone() for name in self.shadow}
        with torch.no_grad():
            for name, value in self.shadow.items():
                params[name].copy_(value)
        try:
            yield module
        finally:
            with torch.no_grad():
                for name, value in saved.items():
                    params[name].copy_(value)
