"""Short-range nuclear repulsion: the Ziegler–Biersack–Littmark (ZBL) universal screened Coulomb
potential, switched off smoothly inside the covalent radii.

A network trained on structures near equilibrium has no reason to be repulsive where no training
pair ever came: two atoms pushed together may attract and fuse. This term supplies the physics there,

    E_rep = Σ_{i<j} V_ZBL(r_ij) · s(r_ij),
    V_ZBL(r) = k_e Z_i Z_j / r · φ(r / a),   a = 0.8854 a_0 / (Z_i^0.23 + Z_j^0.23),
    φ(x) = 0.18175 e^(−3.19980 x) + 0.50986 e^(−0.94229 x) + 0.28022 e^(−0.40290 x) + 0.02817 e^(−0.20162 x),

(Ziegler, Biersack and Littmark, The Stopping and Range of Ions in Solids, 1985), with a C² switch
s = 1 − 10 t³ + 15 t⁴ − 6 t⁵, t = (r − r_in) / (r_out − r_in) clipped to [0, 1], from full strength at
r_in = ``inner`` × (R_i + R_j) to zero at r_out = ``outer`` × (R_i + R_j), R the covalent radii of
ASE's table (Cordero et al. 2008). Pairs farther apart than r_out, which is what chemical bonds and
the structures models are trained on hold, feel nothing of it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from mlip.derived_constants import DerivedConstants
from mlip.nn import safe_length

#: e²/(4π ε₀) in eV·Å
COULOMB_EV_ANGSTROM = 14.399645478425668
#: Bohr radius (Å)
BOHR_ANGSTROM = 0.529177210903
#: the universal screening function's coefficients and exponents
ZBL_COEFFICIENTS = (0.18175, 0.50986, 0.28022, 0.02817)
ZBL_EXPONENTS = (3.19980, 0.94229, 0.40290, 0.20162)
#: default switch radii, as fractions of the sum of the pair's covalent radii
DEFAULT_INNER = 0.5
DEFAULT_OUTER = 0.7


def zbl_energy(r: torch.Tensor, z_i: torch.Tensor, z_j: torch.Tensor) -> torch.Tensor:
    """The unswitched ZBL pair energy V(r) (eV) for distances r [E] (Å) and atomic numbers z_i, z_j [E]."""
    z_i = z_i.to(r.dtype)
    z_j = z_j.to(r.dtype)
    a = 0.8854 * BOHR_ANGSTROM / (z_i.pow(0.23) + z_j.pow(0.23))
    x = r / a
    phi = sum(c * torch.exp(-e * x) for c, e in zip(ZBL_COEFFICIENTS, ZBL_EXPONENTS))
    return COULOMB_EV_ANGSTROM * z_i * z_j / r * phi


def smooth_switch(r: torch.Tensor, r_in: torch.Tensor, r_out: torch.Tensor) -> torch.Tensor:
    """1 for r ≤ r_in, 0 for r ≥ r_out, and the quintic 1 − 10t³ + 15t⁴ − 6t⁵ between (C²)."""
    t = ((r - r_in) / (r_out - r_in)).clamp(0.0, 1.0)
    return 1.0 - t * t * t * (10.0 - 15.0 * t + 6.0 * t * t)


class ZBLRepulsion(DerivedConstants):
    """The switched ZBL repulsion as per-atom energies (half of each pair's energy to each atom).

    Args:
        atomic_numbers: the potential's elements in embedding order [S].
        inner, outer: the switch radii as fractions of R_i + R_j (0 < inner < outer).
    """

    def __init__(self, atomic_numbers: Sequence[int], inner: float = DEFAULT_INNER,
                 outer: float = DEFAULT_OUTER):
        super().__init__()
        from ase.data import covalent_radii

        inner, outer = float(inner), float(outer)
        if not 0.0 < inner < outer:
            raise ValueError(f"ZBL switch radii need 0 < inner < outer, got inner={inner}, outer={outer}")
        numbers = [int(z) for z in atomic_numbers]
        radii = [float(covalent_radii[z]) for z in numbers]
        self.inner = inner
        self.outer = outer
        #: the largest distance (Å) at which any pair of the potential's elements still feels the term
        #: (from the Python numbers: the tensors may be on the meta device, which holds no values)
        self.reach = 2.0 * max(radii) * outer if radii else 0.0
        # Constants of the elements, not weights: rebuilt from the atomic numbers, never stored.
        self.register_constant("z", torch.tensor(numbers, dtype=torch.float64))
        self.register_constant("radii", torch.tensor(radii, dtype=torch.float64))
        #: squared distance (Å²) beyond which no pair of the potential's elements feels the term, with a
        #: margin for rounding: the CPU path skips the term when every edge is at least this long
        self.skip_beyond_sq = (1.01 * self.max_range()) ** 2

    def max_range(self) -> float:
        """The largest distance (Å) at which any pair of the potential's elements still feels the term."""
        return self.reach

    def config(self) -> dict:
        """What a checkpoint stores to rebuild the term (see :func:`build_repulsion`)."""
        return {"kind": "zbl", "inner": self.inner, "outer": self.outer}

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """species [N] (indices into the potential's elements), edge_index [2, E] (i ← j, every pair in
        both directions), vectors [E, 3] → per-atom energies [N] (eV)."""
        dtype = vectors.dtype
        if vectors.device.type == "cpu" and not torch.compiler.is_compiling() and (
                vectors.shape[0] == 0 or bool((vectors.detach() * vectors.detach()).sum(-1).min()
                                              >= self.skip_beyond_sq)):
            # No pair within reach (structures near equilibrium): the energies and their gradient
            # are exact zeros either way, so skip the ~200 operations of the full path. On a GPU the
            # test would wait for the device, so the full (branch-free) path runs there.
            return vectors.new_zeros(species.shape[0])
        length = safe_length((vectors * vectors).sum(-1))
        si, sj = species.index_select(0, edge_index[0]), species.index_select(0, edge_index[1])
        radii = self.radii.to(dtype)
        bond = radii.index_select(0, si) + radii.index_select(0, sj)
        r_out = self.outer * bond
        near = (length < r_out) & (length > 0)
        # Far (and zero-length) edges are evaluated at r_out, where the switch and its derivatives
        # vanish: no energy and no gradient, without a data-dependent branch (no device sync).
        r = torch.where(near, length, r_out)
        z = self.z.to(dtype)
        pair = zbl_energy(r, z.index_select(0, si), z.index_select(0, sj))
        pair = torch.where(near, pair * smooth_switch(r, self.inner * bond, r_out), torch.zeros_like(pair))
        return vectors.new_zeros(species.shape[0]).index_add(0, edge_index[0], 0.5 * pair)

    def extra_repr(self) -> str:
        return f"inner={self.inner}, outer={self.outer}"


def build_repulsion(spec, atomic_numbers: Sequence[int]) -> Optional[ZBLRepulsion]:
    """A repulsion term from its declaration: ``None``/``False``/``"none"`` for none, ``"zbl"`` (default
    switch radii) or ``{"kind": "zbl", "inner": ..., "outer": ...}``. ValueError names what is wrong."""
    if spec is None or spec is False or spec == "none":
        return None
    if spec is True or spec == "zbl":
        spec = {"kind": "zbl"}
    if not isinstance(spec, dict):
        raise ValueError(f"repulsion must be 'zbl', 'none' or a mapping with kind: zbl, got {spec!r} (other "
                         f"energy terms, such as lennard_jones, are declared under terms)")
    spec = dict(spec)
    kind = spec.pop("kind", "zbl")
    if kind != "zbl":
        raise ValueError(f"unknown repulsion kind {kind!r}; available: zbl (other energy terms, such as "
                         f"lennard_jones, are declared under terms)")
    unknown = sorted(set(spec) - {"inner", "outer"})
    if unknown:
        raise ValueError(f"unknown repulsion setting(s) {', '.join(unknown)}; accepted: inner, outer")
    return ZBLRepulsion(atomic_numbers, **spec)
