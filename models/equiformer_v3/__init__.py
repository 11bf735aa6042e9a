"""EquiformerV3: eSCN SO(2) convolutions, SwiGLU-S² activations and merged layer norm."""

from .model import EquiformerV3

__all__ = ["EquiformerV3"]
