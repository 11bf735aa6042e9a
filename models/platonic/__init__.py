"""Platonic Transformer: features on finite rotation groups, frame RoPE attention."""

from .attention import FrameAttention
from .block import FeedForward, PlatonicBlock
from .density import NeighborDensityEmbedding
from .group_linear import GroupLinear
from .groups import GROUP_ORDERS, RotationGroup, get_group
from .model import PlatonicTransformer
from .orientation import ORIENTATIONS, orientation_matrix
from .rope import FrameRoPE, frame_vectors, rotate_pairs

__all__ = [
    "FeedForward",
    "FrameAttention",
    "FrameRoPE",
    "GROUP_ORDERS",
    "GroupLinear",
    "NeighborDensityEmbedding",
    "ORIENTATIONS",
    "PlatonicBlock",
    "PlatonicTransformer",
    "RotationGroup",
    "frame_vectors",
    "get_group",
    "orientation_matrix",
    "rotate_pairs",
]
