"""Partially occupied sites: refused, or (when asked) replaced by their majority species.

A CIF may give a site several species or an occupancy below one (a disordered alloy, a partly
vacant site). ASE's reader puts one atom there, of the species it finds dominant (Au for Cu 0.5 /
Au 0.5), and keeps the occupancies aside in ``atoms.info["occupancy"]``: {kind: {symbol: fraction}},
``kind`` the atom's entry of ``atoms.arrays["spacegroup_kinds"]`` (the row of the file's atom-site
list) or, without that array, its index. A model evaluates atoms, not averages of them, so such a
structure is refused (:func:`require_ordered`) unless the caller asks for the majority species.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

#: occupancies within this of 1 (CIF files round them: 0.333 + 0.667) count as full
TOLERANCE = 1e-3

#: what the refusal suggests (``option``: the caller's way of asking for the majority species)
HOW_TO_ORDER = ("order the structure first (a supercell with the species spread over its sites, e.g. "
                "pymatgen's OrderDisorderedStructureTransformation or an SQS)")


@dataclass
class DisorderedSite:
    """A site with several species or an occupancy other than one.

    Attributes:
        kind: the site's row in the file's atom-site list (``spacegroup_kinds``), or the atom's index.
        label: the file's label of that row (``Cu1``), or None when the reader did not keep it.
        atoms: indices of the atoms standing on the site or its symmetry copies.
        fractional: the fractional coordinates of the first of them (Cartesian without a cell).
        occupancies: species → occupancy.
    """

    kind: int
    label: Optional[str]
    atoms: List[int]
    fractional: np.ndarray
    occupancies: Dict[str, float]

    @property
    def vacancy(self) -> float:
        """The fraction of the site left empty."""
        return max(0.0, 1.0 - sum(self.occupancies.values()))

    def describe(self) -> str:
        """``site Cu1 (Cu 0.5, Au 0.5 at 0, 0, 0; 2 atoms)``."""
        name = self.label if self.label else f"#{self.kind}"
        parts = [f"{symbol} {fraction:g}" for symbol, fraction in self.occupancies.items()]
        if self.vacancy > TOLERANCE:
            parts.append(f"vacant {self.vacancy:g}")
        where = ", ".join(f"{x:.4g}" for x in self.fractional)
        count = f"; {len(self.atoms)} atoms" if len(self.atoms) > 1 else ""
        return f"site {name} ({', '.join(parts)} at {where}{count})"

    def majority(self) -> Optional[str]:
        """The species of highest occupancy, or None when two share it or the site is mostly empty."""
        ranked = sorted(self.occupancies.items(), key=lambda item: -item[1])
        top = ranked[0][1]
        if len(ranked) > 1 and ranked[1][1] >= top - TOLERANCE:
            return None
        if self.vacancy >= top - TOLERANCE:
            return None
        return ranked[0][0]


def disordered_sites(atoms, labels: Optional[Sequence[str]] = None) -> List[DisorderedSite]:
    """The sites of ``atoms`` whose ``info["occupancy"]`` holds several species or an occupancy other
    than one (none when the reader recorded no occupancies); ``labels``: the file's site labels, by
    kind. ValueError for occupancies that are not numbers in (0, 1] or sum to more than one."""
    table = atoms.info.get("occupancy")
    if not table:
        return []
    kinds = np.asarray(atoms.arrays.get("spacegroup_kinds", np.arange(len(atoms))))
    sites = []
    for kind in sorted({int(k) for k in kinds}):
        occupancies = table.get(str(kind), table.get(kind))
        if occupancies is None:
            continue
        members = np.flatnonzero(kinds == kind).tolist()
        label = labels[kind] if labels is not None and kind < len(labels) else None
        name = label or f"#{kind}"
        try:
            occupancies = {str(symbol): float(fraction) for symbol, fraction in occupancies.items()}
        except (AttributeError, TypeError, ValueError):
            raise ValueError(f"site {name}: occupancies {occupancies!r} are not numbers") from None
        if not occupancies or any(not 0 < f <= 1 + TOLERANCE for f in occupancies.values()):
            raise ValueError(f"site {name}: occupancies {occupancies} must lie in (0, 1]")
        if sum(occupancies.values()) > 1 + TOLERANCE:
            raise ValueError(f"site {name}: occupancies {occupancies} sum to more than 1")
        if len(occupancies) == 1 and next(iter(occupancies.values())) >= 1 - TOLERANCE:
            continue  # one species, fully occupied: ordered
        cell = atoms.cell
        position = atoms.positions[members[0]]
        fractional = cell.scaled_positions(position[None])[0] if cell.rank == 3 else position
        sites.append(DisorderedSite(kind, label, members, fractional, occupancies))
    return sites


def site_labels(path, index: int = -1, format: Optional[str] = None) -> Optional[List[str]]:
    """The site labels (``_atom_site_label``: ``Cu1``, ...) of frame ``index`` of a CIF, by kind; None for
    a file that has none (another format, or a CIF without labels)."""
    import ase.io

    try:
        tagged = ase.io.read(str(path), index=index, format=format, store_tags=True)
    except Exception:  # not a CIF (no tags to keep), or unreadable: sites are named by their row
        return None
    labels = tagged.info.get("_atom_site_label")
    return [str(label) for label in labels] if isinstance(labels, list) else None


def require_ordered(atoms, where: str, majority_species: bool = False,
                    option: Optional[str] = "--majority-species", labels: Optional[Sequence[str]] = None):
    """``atoms`` if every site holds one species fully; else ValueError naming the first disordered
    site (``where``: the file, or file and frame, the message starts with), unless
    ``majority_species``: then a copy with each disordered site given its species of highest
    occupancy (ValueError for a site where two species tie or most of it is vacant). ``option`` is
    how the caller asks for the majority species (named in the message; None: the caller has none)."""
    sites = disordered_sites(atoms, labels)
    if not sites:
        return atoms
    others = len(sites) - 1
    more = f" (and {others} more disordered site{'s' if others > 1 else ''})" if others else ""
    if not majority_species:
        instead = f", or pass {option} to put each site's majority species there" if option else ""
        raise ValueError(f"{where}: {sites[0].describe()} is partially occupied{more}, and a model "
                         f"needs one species per site: {HOW_TO_ORDER}{instead}")
    atoms = atoms.copy()
    for site in sites:
        symbol = site.majority()
        if symbol is None:
            raise ValueError(f"{where}: {site.describe()} has no majority species; {HOW_TO_ORDER}")
        atoms.symbols[site.atoms] = symbol
    del atoms.info["occupancy"]  # every site now holds its one species (a CIF written later says so)
    return atoms


__all__ = ["DisorderedSite", "TOLERANCE", "disordered_sites", "require_ordered", "site_labels"]
