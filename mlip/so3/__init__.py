"""SO(3) tools shared by the equivariant models: real spherical harmonics (e3nn basis), Wigner-D
matrices from rotation matrices, S² quadrature grids, edge frames and the m-primary layout."""

from .edge_frame import edge_rotation
from .m_layout import (
    degrees,
    degrees_m_primary,
    m_blocks,
    m_primary_order,
    num_truncated_coefficients,
)
from .s2_grid import S2Grid, grid_points, grid_projections, product_resolution, quadrature_resolution
from .spherical_harmonics import num_coefficients, spherical_harmonics
from .wigner import wigner_D

__all__ = [
    "S2Grid",
    "degrees",
    "degrees_m_primary",
    "edge_rotation",
    "grid_points",
    "grid_projections",
    "m_blocks",
    "m_primary_order",
    "num_coefficients",
    "num_truncated_coefficients",
    "product_resolution",
    "quadrature_resolution",
    "spherical_harmonics",
    "wigner_D",
]
