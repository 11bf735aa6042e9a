"""What each GPAW property of the v1 validation (density 2.5) cost, and its mesh at density 8.

    python examples/datasets/sige-pbe/dft-validation/cost_by_stage.py OUT_JSON

Replays the v1 run from ``cache/gpaw-6e1f2862b3db`` (``--cache-only gpaw``, nothing computed) and, for
every structure served, notes the mesh at density 2.5 and at density 8 (of the structure the mesh was made
for: a scan's densest), GPAW's irreducible k-points on each (the structure's own symmetry, as GPAW reduces
them) and the recorded wall time. The estimate at density 8 scales each wall time by the ratio of
irreducible k-points (the cost of a plane-wave SCF grows about linearly with them).
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STAGES = ("lattice", "phases", "elastic", "phonons", "vacancy", "surface")


def irreducible(atoms, size) -> int:
    from ase.calculators.calculator import kpts2sizeandoffsets
    from gpaw.new.brillouin import MonkhorstPackKPoints
    from gpaw.new.symmetry import create_symmetries_object

    size, offset = kpts2sizeandoffsets(size=size, gamma=True, atoms=atoms)
    return len(MonkhorstPackKPoints(size, offset).reduce(create_symmetries_object(atoms), strict=False))


def main(out_json: str) -> dict:
    from mlip.io import write_json
    from mlip.testing.scripts import script_module
    from mlip.workflows.kpoints import kpoint_mesh

    rows = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0, 0, 0, 0.0]))
    stage = ["?"]
    with script_module(HERE.parents[3] / "benchmarks" / "accuracy" / "dft_validation.py") as dv, \
            tempfile.TemporaryDirectory() as tmp:
        account = dv.CachedCalculator._account

        def noting(self, atoms, record):  # the replay's accounting, plus the meshes at both densities
            account(self, atoms, record)
            made_for = atoms if self.mesh_reference is None else self.mesh_reference
            m25, m8 = kpoint_mesh(made_for, 2.5), kpoint_mesh(made_for, 8.0)
            meshes = ("x".join(map(str, m25)), "x".join(map(str, m8)))
            row = rows[stage[0]][(atoms.get_chemical_formula(), *meshes)]
            k25, k8 = irreducible(atoms, m25), irreducible(atoms, m8)
            row[0] += 1
            row[1] += record["wall_time_s"]
            row[2] += k25
            row[3] += k8
            row[4] += record["wall_time_s"] * k8 / k25

        dv.CachedCalculator._account = noting
        for name in STAGES:
            def staged(ctx, element, *rest, _f=getattr(dv, f"prop_{name}"), _n=name):
                stage[0] = f"{_n} {element}"
                return _f(ctx, element, *rest)

            setattr(dv, f"prop_{name}", staged)
        (Path(tmp) / "cache").symlink_to(HERE / "cache")
        dv.main(["--out", tmp, "--cache-only", "gpaw", "--no-progress", "--properties", *STAGES])
    out = {stage_name: [{"structure": k[0], "mesh_2.5": k[1], "mesh_8": k[2], "evaluations": v[0],
                         "wall_s_2.5": v[1], "irreducible_k_2.5": v[2] / v[0], "irreducible_k_8": v[3] / v[0],
                         "wall_s_8_estimate": v[4]} for k, v in per.items()]
           for stage_name, per in rows.items()}
    write_json(Path(out_json), out)
    for name, per in out.items():
        print(f"{name}: {sum(r['evaluations'] for r in per)} evaluations, "
              f"{sum(r['wall_s_2.5'] for r in per) / 60:.1f} min at 2.5, "
              f"~{sum(r['wall_s_8_estimate'] for r in per) / 3600:.2f} h at 8")
    return out


if __name__ == "__main__":
    main(sys.argv[1])
