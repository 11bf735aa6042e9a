"""The structures the Si–Ge active-learning loop explores from (issue 57, item 4): ``learn/seeds.xyz``.

    python examples/datasets/sige-pbe/v2/learn_seeds.py

The issue names where the models are worst and where first-principles time should go: crystals at
300–1,800 K, the liquid, surfaces and the diamond → β-Sn path. The loop (``learn.sh``) runs MD at 300, 900
and 1,800 K, relaxations, strained and rattled copies from each seed, scores every frame by the
committee and labels the most uncertain with GPAW on the v2 rule. So the seeds are small cells of those
kinds, taken from the v1 structures (``sige-structures.xyz``) and the v2 additions (``additions.xyz``):
:data:`PER_KIND` of each kind in :data:`KINDS`, of :data:`MIN_ATOMS`–:data:`MAX_ATOMS` atoms (a label
on the v2 mesh costs minutes to hours, more with more atoms; MD in fewer than 8 atoms explores little),
drawn with a fixed seed, and for the path its ends and middle for each element. Each seed keeps its
``id`` and ``config_type``; the file depends only on the inputs (a rerun writes the same file).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import List

import numpy as np

HERE = Path(__file__).resolve().parent
SET = HERE.parent
#: the kinds of v1 the seeds are drawn from, and how many of each
KINDS = ("prototype", "ordered_alloy", "random_alloy", "surface", "liquid", "amorphous", "vacancy")
PER_KIND = 2
MIN_ATOMS, MAX_ATOMS = 8, 16


def seeds(structures: List, additions: List, seed: int = 0) -> List:
    """The seed structures (module docstring): per kind of :data:`KINDS` :data:`PER_KIND` periodic cells (slabs too)
    of :data:`MIN_ATOMS`–:data:`MAX_ATOMS` atoms, then the first, middle and last point of each element's
    diamond → β-Sn path at its own volume."""
    rng = np.random.default_rng(seed)
    out = []
    for kind in KINDS:
        pool = [a for a in structures if a.info.get("config_type") == kind and a.pbc.any()
                and MIN_ATOMS <= len(a) <= MAX_ATOMS]
        if len(pool) < PER_KIND:
            raise ValueError(f"{len(pool)} {kind} cells of {MIN_ATOMS}-{MAX_ATOMS} atoms, need {PER_KIND}")
        out += [pool[k].copy() for k in sorted(rng.choice(len(pool), PER_KIND, replace=False))]
    for element in ("Si", "Ge"):
        path = [a for a in additions if a.info.get("config_type") == "transition_path"
                and a.get_chemical_symbols()[0] == element and a.info.get("volume_scale") == 1.0]
        if len(path) < 3:
            raise ValueError(f"additions.xyz has {len(path)} points of the {element} path, need 3")
        out += [path[k].copy() for k in (0, len(path) // 2, len(path) - 1)]
    for atoms in out:
        atoms.calc = None
        atoms.info = {key: atoms.info[key] for key in ("id", "config_type") if key in atoms.info}
    return out


def main(argv=None) -> None:
    from ase.io import read, write

    from mlip.io import atomic_write

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("-o", "--out", type=Path, default=HERE / "learn" / "seeds.xyz")
    args = parser.parse_args(argv)
    frames = seeds(read(SET / "sige-structures.xyz", ":"), read(HERE / "additions.xyz", ":"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, lambda tmp: write(tmp, frames, format="extxyz"))
    kinds = Counter(atoms.info["config_type"] for atoms in frames)
    print(f"{args.out}: {len(frames)} seeds, {dict(kinds)}, {sum(len(a) for a in frames)} atoms")


if __name__ == "__main__":
    main()
