"""Where the Platonic Transformer's rotation group points in the laboratory frame.

The model is exactly invariant only to its finite group. Written with the Cartesian axes, the
tetrahedral and octahedral groups' rotation axes (x, y, z and the body diagonals) coincide with the
symmetry axes of cubic crystals as structure files give them, so a crystal from a file sits in the one
orientation where every frame sees it along a symmetry direction: a measure-zero set of the
orientations that rotation augmentation trains on. Evaluated with the group aligned, the weights of the
shipped ``platonic-emt`` (trained before this option) err by +6.7 to +9.4 meV/atom on average on every kind of
bulk test structure; with the ``"generic"`` orientation by −2.2 to +1.6 (vacancies −5.3), and the test MAE falls from 12.9 to
7.8 meV/atom (stress 2.88 → 1.96 meV/Å³, forces 39.6 → 40.8 meV/Å).

An *orientation* R₀ turns the group as a whole: frame g is R₀R_g, so the energy becomes exactly
invariant to R₀R_gR₀ᵀ instead of R_g. With rotation augmentation the training loss does not depend on R₀
(R₀ᵀQ is as uniformly distributed as Q); R₀ decides only which orientation a structure is evaluated in.

* ``"aligned"``: R₀ = I (the group as written; the paper's choice, and what checkpoints written before
  this option mean).
* ``"generic"``: the rotation by 1 rad about the axis (1, e, π)/|(1, e, π)|, a fixed rotation with no
  relation to crystal axes: every lattice direction [uvw] with |u|, |v|, |w| ≤ 3 (cubic or hexagonal cell)
  stays more than 1.8° away from the rotation axes of the tetrahedral and octahedral groups.
"""

from __future__ import annotations

import math

import torch

ORIENTATIONS = ("aligned", "generic")

#: axis and angle (rad) of the ``"generic"`` orientation; changing them changes every model that uses it
GENERIC_AXIS = (1.0, math.e, math.pi)
GENERIC_ANGLE = 1.0


def axis_angle_matrix(axis, angle: float) -> torch.Tensor:
    """Rotation matrix [3, 3] (float64) by ``angle`` radians about ``axis`` (Rodrigues' formula)."""
    a = torch.tensor(axis, dtype=torch.float64)
    a = a / torch.linalg.vector_norm(a)
    k = torch.tensor([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]], dtype=torch.float64)
    return torch.eye(3, dtype=torch.float64) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def orientation_matrix(name: str) -> torch.Tensor:
    """R₀ [3, 3] (float64) of a named orientation; ValueError naming the accepted ones otherwise."""
    if name == "aligned":
        return torch.eye(3, dtype=torch.float64)
    if name == "generic":
        return axis_angle_matrix(GENERIC_AXIS, GENERIC_ANGLE)
    raise ValueError(f"unknown orientation {name!r}; accepted: {', '.join(ORIENTATIONS)}")
