"""Chemical symbols and atomic numbers (ASE's table), with validation."""

from __future__ import annotations

from typing import Iterable, List

from ase.data import atomic_numbers, chemical_symbols


def to_atomic_numbers(species: Iterable[str | int]) -> List[int]:
    """Convert chemical symbols or atomic numbers to a list of atomic numbers.

    Raises ``ValueError`` naming the first entry that is not an element, or a duplicate.
    """
    out: List[int] = []
    for s in species:
        if isinstance(s, str):
            if s not in atomic_numbers or s == "X":
                raise ValueError(f"unknown chemical element {s!r}")
            z = atomic_numbers[s]
        else:
            z = int(s)
            if not 1 <= z < len(chemical_symbols):
                raise ValueError(f"invalid atomic number {s!r}")
        if z in out:
            raise ValueError(f"element {chemical_symbols[z]} is listed twice in species")
        out.append(z)
    if not out:
        raise ValueError("species must list at least one element")
    return out


def to_symbols(numbers: Iterable[int]) -> List[str]:
    """Chemical symbols of atomic numbers."""
    return [chemical_symbols[int(z)] for z in numbers]
