"""Pair potentials as energy terms: Lennard-Jones and Buckingham, switched off smoothly before the cutoff.

    E = Σ_{i<j} V_{Z_i Z_j}(r_ij) · s(r_ij),   per atom: half of each of its pairs,

with s the C² switch of :func:`mlip.repulsion.smooth_switch` (1 up to ``r_on``, 0 from ``r_max`` on), so
energy, forces and stress are continuous as a neighbour crosses ``r_max`` (by default the potential's
cutoff). The parameters of each pair come from the model config: one number for every pair, or a
mapping by element (``{Cu: 0.4, Au: 0.5}``, combined by the term's mixing rule) and by pair
(``{"Cu-Au": 0.45}``, either order), the pairs overriding the elements; every pair of the potential's
elements must get a value. They are derived constants (:class:`mlip.derived_constants.DerivedConstants`):
checkpoints store the arguments in their JSON, not the tables.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence, Union

import torch

from mlip.derived_constants import DerivedConstants
from mlip.elements import to_symbols
from mlip.keys import is_number
from mlip.nn import safe_length
from mlip.repulsion import smooth_switch
from mlip.terms.base import EnergyTerm

#: a parameter as declared: one number, or numbers by element and by pair ("A-B")
Parameter = Union[float, Dict[str, float]]
#: r_on as a fraction of r_max when not given
DEFAULT_SWITCH_START = 0.75


def pair_table(name: str, value: Parameter, symbols: Sequence[str],
               mix: Optional[Callable[[float, float], float]], positive: bool = False) -> torch.Tensor:
    """[S, S] float64 table of parameter ``name`` for the elements ``symbols`` (see the module docstring);
    ``mix`` combines two elements' values (None: the term takes pairs only). ValueError naming the
    problem for a value that is not a number (``positive``: not above zero), an unknown element and a
    pair without a value."""
    n = len(symbols)
    numbers = value.items() if isinstance(value, dict) else [(None, value)]
    for key, number in numbers:
        if not is_number(number) or (positive and not number > 0):
            where = name if key is None else f"{name}[{key!r}]"
            kind = "a positive number" if positive else "a number"
            raise ValueError(f"{where} must be {kind}{'' if key else ' or a mapping by element or pair'}, "
                             f"got {number!r}")
    if not isinstance(value, dict):
        return torch.full((n, n), float(value), dtype=torch.float64)
    elements: Dict[str, float] = {}
    pairs: Dict[tuple, float] = {}
    for key, number in value.items():
        parts = str(key).split("-")
        unknown = [p for p in parts if p not in symbols]
        if len(parts) > 2 or unknown:
            raise ValueError(f"{name}: {key!r} is neither an element nor a pair 'A-B' of the potential's "
                             f"elements ({', '.join(symbols)})")
        if len(parts) == 1:
            if mix is None:
                raise ValueError(f"{name} is given per pair ('A-B'), not per element: {key!r}")
            elements[parts[0]] = float(number)
        else:
            pairs[tuple(sorted(parts))] = float(number)
    table = torch.empty((n, n), dtype=torch.float64)
    missing = []
    for i, a in enumerate(symbols):
        for j, b in enumerate(symbols):
            pair = tuple(sorted((a, b)))
            if pair in pairs:
                table[i, j] = pairs[pair]
            elif a in elements and b in elements:
                table[i, j] = mix(elements[a], elements[b])
            elif i <= j:
                missing.append(f"{a}-{b}")
    if missing:
        raise ValueError(f"{name} has no value for the pair(s) {', '.join(missing)}")
    return table


class PairTerm(EnergyTerm, DerivedConstants):
    """A switched pair potential (see the module docstring); a subclass gives :meth:`pair_energy` and
    registers its parameter tables with :meth:`register_pair_tables`.

    Args:
        atomic_numbers: the potential's elements in embedding order [S].
        cutoff: the potential's cutoff (Å).
        r_max: where the term has fallen to zero (Å; None: the cutoff, which it must not exceed).
        r_on: where the switch starts (Å, below ``r_max``; None: 0.75 × ``r_max``).
    """

    def __init__(self, atomic_numbers: Sequence[int], cutoff: float, r_max: Optional[float] = None,
                 r_on: Optional[float] = None):
        super().__init__()
        r_max = float(cutoff) if r_max is None else r_max
        if not is_number(r_max) or not 0 < r_max <= cutoff:
            raise ValueError(f"{type(self).__name__}: r_max must be a positive number of Å up to the cutoff "
                             f"{cutoff}, got {r_max!r}")
        r_on = DEFAULT_SWITCH_START * r_max if r_on is None else r_on
        if not is_number(r_on) or not 0 <= r_on < r_max:
            raise ValueError(f"{type(self).__name__}: r_on must be a number of Å from 0 to r_max ({r_max}), "
                             f"got {r_on!r}")
        self.r_max, self.r_on = float(r_max), float(r_on)
        self.symbols = to_symbols([int(z) for z in atomic_numbers])
        self.table_names: tuple = ()

    def register_pair_tables(self, **tables: torch.Tensor) -> None:
        """Register the [S, S] tables (in :meth:`pair_energy`'s order) as derived constants."""
        self.table_names = tuple(tables)
        for name, table in tables.items():
            self.register_constant(name, table)

    def max_range(self) -> float:
        """The distance (Å) from which no pair feels the term."""
        return self.r_max

    def pair_energy(self, r: torch.Tensor, *parameters: torch.Tensor) -> torch.Tensor:
        """V(r) [E] (eV) at distances r [E] (Å, > 0) with each pair's parameters [E]."""
        raise NotImplementedError

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        """species [N], edge_index [2, E] (i ← j, both directions), vectors [E, 3] → per-atom energies [N]."""
        length = safe_length((vectors * vectors).sum(-1))
        si, sj = species.index_select(0, edge_index[0]), species.index_select(0, edge_index[1])
        pair = si * len(self.symbols) + sj  # row-major index into the [S, S] tables
        parameters = [getattr(self, name).to(vectors.dtype).reshape(-1).index_select(0, pair)
                      for name in self.table_names]
        near = (length < self.r_max) & (length > 0)
        # far (and zero-length) edges are evaluated at r_max, where the switch and its derivatives vanish:
        # no energy and no gradient, without a data-dependent branch
        r = torch.where(near, length, torch.full_like(length, self.r_max))
        energy = self.pair_energy(r, *parameters) * smooth_switch(r, self.r_on, self.r_max)
        energy = torch.where(near, energy, torch.zeros_like(energy))
        return vectors.new_zeros(species.shape[0]).index_add(0, edge_index[0], 0.5 * energy)

    def extra_repr(self) -> str:
        return f"r_on={self.r_on}, r_max={self.r_max}"


class LennardJones(PairTerm):
    """V(r) = 4 ε [(σ/r)¹² − (σ/r)⁶], switched (see :class:`PairTerm`); elements combined by the
    Lorentz–Berthelot rule, σ_ij = (σ_i + σ_j)/2, ε_ij = √(ε_i ε_j).

    Args:
        atomic_numbers: the potential's elements in embedding order [S].
        cutoff: the potential's cutoff (Å).
        epsilon: well depth ε (eV), a number or a mapping by element and pair.
        sigma: σ (Å, where V = 0), likewise.
        r_max: where the term has fallen to zero (Å; None: the cutoff).
        r_on: where the switch starts (Å; None: 0.75 × ``r_max``).
    """

    def __init__(self, atomic_numbers: Sequence[int], cutoff: float, epsilon: Parameter, sigma: Parameter,
                 r_max: Optional[float] = None, r_on: Optional[float] = None):
        super().__init__(atomic_numbers, cutoff, r_max, r_on)
        self.register_pair_tables(
            epsilon=pair_table("epsilon", epsilon, self.symbols, lambda a, b: math.sqrt(a * b)),
            sigma=pair_table("sigma", sigma, self.symbols, lambda a, b: 0.5 * (a + b), positive=True))

    def pair_energy(self, r, epsilon, sigma):
        s6 = (sigma / r) ** 6
        return 4.0 * epsilon * (s6 * s6 - s6)


class Buckingham(PairTerm):
    """V(r) = A exp(−r/ρ) − C/r⁶, switched (see :class:`PairTerm`); parameters per pair (``{"Si-O": ...}``)
    or one number for all. It diverges to −∞ as r → 0 wherever C > 0: pair it with a repulsive core
    (the ZBL repulsion) when atoms may come that close.

    Args:
        atomic_numbers: the potential's elements in embedding order [S].
        cutoff: the potential's cutoff (Å).
        a: A (eV), a number or a mapping by pair.
        rho: ρ (Å), likewise.
        c: C (eV Å⁶), likewise.
        r_max: where the term has fallen to zero (Å; None: the cutoff).
        r_on: where the switch starts (Å; None: 0.75 × ``r_max``).
    """

    def __init__(self, atomic_numbers: Sequence[int], cutoff: float, a: Parameter, rho: Parameter,
                 c: Parameter, r_max: Optional[float] = None, r_on: Optional[float] = None):
        super().__init__(atomic_numbers, cutoff, r_max, r_on)
        self.register_pair_tables(a=pair_table("a", a, self.symbols, None),
                                  rho=pair_table("rho", rho, self.symbols, None, positive=True),
                                  c=pair_table("c", c, self.symbols, None))

    def pair_energy(self, r, a, rho, c):
        return a * torch.exp(-r / rho) - c / r ** 6


__all__ = ["Buckingham", "LennardJones", "PairTerm", "pair_table"]
