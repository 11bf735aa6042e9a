"""The cards' sample: the first 3 test frames of every config_type, a small labelled file kept in the
repository, which the test suite checks a shipped model still reproduces.

    python examples/datasets/sige-pbe/card_sample.py TEST.xyz OUT.xyz
"""

import sys

from ase.io import read, write


def main(test: str, out: str, per_kind: int = 3) -> None:
    frames, seen = [], {}
    for atoms in read(test, ":"):
        kind = atoms.info.get("config_type")
        if seen.get(kind, 0) < per_kind:
            seen[kind] = seen.get(kind, 0) + 1
            frames.append(atoms)
    write(out, frames, format="extxyz")


if __name__ == "__main__":
    main(*sys.argv[1:3])
