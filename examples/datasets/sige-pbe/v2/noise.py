"""The label noise of v1, measured on every structure that has a v2 label: v1 (Γ-centred mesh of density
2.5 Å⁻¹) against v2 (density 8, the converged reference of the k-point study), per kind.

    python examples/datasets/sige-pbe/v2/noise.py [--json benchmarks/results/sige-v1-label-noise.json]

Per structure: the energy difference per atom, raw and structure-dependent (a constant per element,
which a model's isolated-atom references absorb, fitted over all compared structures and removed), the
force MAE and the stress MAE (GPa). Per kind: the number compared, the spread (std) and the largest
|structure-dependent ΔE|, the mean force and stress MAE. This is the floor v1 puts under a model's
errors, and it grows with every tranche of v2 labels.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
SET = HERE.parent
sys.path.insert(0, str(SET.parents[2] / "benchmarks" / "data"))

from kpoint_convergence import errors, structure_dependent  # noqa: E402


def compare(structures: List, v1_run: Path, v2_run: Path) -> List[Dict[str, Any]]:
    """One row per structure with both labels (module docstring)."""
    from mlip.workflows.labelling import result_id
    from mlip.workflows.sharding import load_results

    v1, v2 = load_results(v1_run), load_results(v2_run)
    rows, compositions = [], {}
    for atoms in structures:
        key = result_id(atoms)
        old, new = v1.get(key), v2.get(key)
        if not old or not new or old.get("failed") or new.get("failed"):
            continue
        symbols = atoms.get_chemical_symbols()
        compositions[key] = {e: symbols.count(e) for e in sorted(set(symbols))}
        rows.append({"structure": key, "config_type": str(atoms.info.get("config_type", "")),
                     "n_atoms": len(atoms), "v2_band_gap_eV": new.get("label_details", {}).get("band_gap_eV"),
                     **errors(old, {**new, "n_atoms": len(atoms)})})
    if rows:
        structure_dependent(rows, compositions)
    return rows


def by_kind(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, float]]:
    out = {}
    for kind in sorted({r["config_type"] for r in rows}):
        mine = [r for r in rows if r["config_type"] == kind]
        de = np.array([r["dE_structure_meV_per_atom"] for r in mine])
        stress = [r["stress_mae_GPa"] for r in mine if "stress_mae_GPa" in r]
        out[kind] = {"n": len(mine), "energy_std_meV_per_atom": float(de.std()),
                     "energy_max_meV_per_atom": float(np.abs(de).max()),
                     "forces_mae_meV_per_A": float(np.mean([r["force_mae_meV_per_A"] for r in mine])),
                     "stress_mae_GPa": float(np.mean(stress)) if stress else None}
    return out


def main() -> None:
    from ase.io import read

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", default=None, help="write the record here")
    args = parser.parse_args()
    rows = compare(read(SET / "sige-structures.xyz", ":"), SET / "run", HERE / "run")
    kinds = by_kind(rows)
    for kind, c in kinds.items():
        stress = "" if c["stress_mae_GPa"] is None else f", stress MAE {c['stress_mae_GPa']:.2f} GPa"
        print(f"{kind:14s} n={c['n']:3d}  ΔE std {c['energy_std_meV_per_atom']:5.1f}, max "
              f"{c['energy_max_meV_per_atom']:5.1f} meV/atom, force MAE {c['forces_mae_meV_per_A']:5.1f} "
              f"meV/Å{stress}")
    if rows:
        de = np.array([r["dE_structure_meV_per_atom"] for r in rows])
        print(f"all            n={len(rows):3d}  ΔE std {de.std():5.1f} meV/atom; element constants "
              f"{rows[0]['element_constants_meV']} meV")
    if args.json:
        from mlip.io import write_json

        command = "python examples/datasets/sige-pbe/v2/noise.py --json " + Path(args.json).name
        write_json(args.json, {"command": command, "n_compared": len(rows), "kinds": kinds, "rows": rows})


if __name__ == "__main__":
    main()
