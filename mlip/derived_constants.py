"""Derived constant buffers that every dtype conversion recomputes from an exact float64 master.

A model's derived constants (S² grid matrices, radial frequencies and centres, layer-norm weights)
are functions of its hyperparameters, not weights: checkpoints do not store them, ``create_model``
builds them in float64. As ordinary buffers they follow the model's dtype, so the model runs in
float32 without casting them at every call; but a cast to float32 would round them, and casting
the model back to float64 (a calculator's float64 copy of it) would keep the rounded values.
:class:`DerivedConstants` keeps a float64 master of each one and, after every conversion of the
module (``.to()``, ``.float()``, ``.double()``, ``.cuda()``, ...), writes the master into the
converted buffer: its float32 copy is the float64 value rounded once, and its float64 copy is the
float64 value itself, however often the model was cast in between.
"""

from __future__ import annotations

from typing import Dict

import torch
from torch import nn


class DerivedConstants(nn.Module):
    """Base class of modules holding derived constants; register them with :meth:`register_constant`."""

    def register_constant(self, name: str, value: torch.Tensor) -> None:
        """A non-persistent buffer ``name`` (not saved: rebuilt from the hyperparameters) holding
        ``value``, whose float64 master is restored into it by every dtype or device conversion."""
        value = value.detach()
        masters: Dict[str, torch.Tensor] = self.__dict__.setdefault("_constant_masters", {})
        if value.is_floating_point() and not value.is_meta:  # a meta module (shapes only) has no values
            masters[name] = value.to(device="cpu", dtype=torch.float64, copy=True)
        self.register_buffer(name, value, persistent=False)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        with torch.no_grad():
            for name, master in self.__dict__.get("_constant_masters", {}).items():
                buffer = self._buffers.get(name)
                if buffer is not None and buffer.is_floating_point():
                    buffer.copy_(master)  # in place: keeps whatever fn made of it (device, shared memory)
        return self
