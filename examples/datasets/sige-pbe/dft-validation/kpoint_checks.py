"""Does a denser k-point mesh move the big-cell GPAW properties of ``dft_validation.py``? One check each.

    mpiexec -n 2 gpaw python examples/datasets/sige-pbe/dft-validation/kpoint_checks.py -- \\
        --checks surface phonons vacancy elastic

Each check takes the structures of the v1 validation (density 2.5; their energies, forces and stresses are
read from ``cache/gpaw-6e1f2862b3db``, relaxations replayed from it) and evaluates the same structures, with
the same physics, on a denser Γ-centred mesh (stored in ``kpoint-checks/cache``, so a killed run resumes):

* ``phonons``: the supercell of ``prop_phonons`` (3×3×3 primitive cells, mesh 2³) samples the primitive
  zone as a 6³ mesh does; density 8 would give the supercell 6³, i.e. 18³ on the primitive cell. The check
  displaces one atom of the 2-atom primitive cell by phonopy's 0.01 Å along x (a displacement repeated
  in every cell: the Γ-point optical mode) on 6³ and on 18³, and compares the force on the displaced atom
  and the Γ optical frequency sqrt(2 Φ / m) / 2π it gives;
* ``vacancy``: the 64-site perfect cell, the unrelaxed and the (v1-)relaxed 63-atom cells on 2³ (v1) and a
  denser mesh (``--vacancy-mesh``, default 3³); the unrelaxed and relaxed formation energies;
* ``surface``: bulk diamond (5³ → 16³), the bulk-terminated 1×1 slab (5×5×1 → 13×13×1) and the v1-relaxed
  2×1 slab (5×3×1 → 13×7×1, density 8's meshes); γ(100) of both;
* ``elastic``: the ±1 % strained cells of ``prop_elastic`` at the v1 lattice constant (clamped ions, and
  the v1-relaxed shears) on 5³ and 16³; C11, C12, C44 (relaxed and clamped-ion).

Structures relaxed at density 2.5 are kept: a denser mesh moves a relaxed geometry only to second order in
the energy. The report is ``kpoint-checks/kpoint_checks.json`` (written after every check).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from ase.units import GPa

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[3]
V1_KEY = "gpaw-6e1f2862b3db"
CHECKS = ("surface", "phonons", "vacancy", "elastic")


def load_validation():
    from mlip.testing.scripts import script_module

    return script_module(REPOSITORY / "benchmarks" / "accuracy" / "dft_validation.py")


class Meshes:
    """Evaluations of one structure on the v1 rule (read from the v1 cache) or on a fixed mesh (cached
    under ``kpoint-checks/cache``)."""

    def __init__(self, dv, ranks):
        from mlip.workflows.labelling import GPAW_PBE_SETTINGS

        self.dv, self.ranks = dv, ranks
        self.v1 = dv.gpaw_method({}, cache_only=False)
        assert self.v1.key == V1_KEY, self.v1.key
        self.settings = dict(GPAW_PBE_SETTINGS)
        self.v1_calc = dv.CachedCalculator(self.v1, HERE / "cache" / V1_KEY, ranks, cache_only=True)
        self.fixed = {}

    def context(self):
        return self.dv.Context(self.v1, self.v1_calc, self.dv.Sizes(), HERE, False)

    def calc(self, mesh):
        """A cached calculator whose every structure gets ``mesh`` (None: the v1 cache, read only)."""
        if mesh is None:
            return self.v1_calc
        mesh = tuple(int(n) for n in mesh)
        if mesh not in self.fixed:
            from mlip.workflows.labelling import gpaw_calculator

            def make(atoms, m=mesh):
                return gpaw_calculator(atoms, self.settings, mesh=m)

            method = self.dv.Method("gpaw", self.v1.key, make, mesh=lambda atoms, m=mesh: m)
            folder = HERE / "kpoint-checks" / "cache" / V1_KEY
            self.fixed[mesh] = self.dv.CachedCalculator(method, folder, self.ranks)
        return self.fixed[mesh]

    def record(self, atoms, mesh):
        calc = self.calc(mesh)
        t0 = time.perf_counter()
        record = calc.evaluate(atoms)
        return {**record, "mesh": None if mesh is None else list(mesh),
                "seconds_now": time.perf_counter() - t0}


def a_of(element):
    return json.loads((HERE / "cache" / V1_KEY / "pinned.json").read_text())[f"lattice_constant_A.{element}"]


def check_phonons(dv, meshes, elements, dense, extra=()):
    from ase.data import atomic_masses
    from ase.units import _amu, _e

    out = {}
    for element in elements:
        cell = dv.diamond(element, a_of(element))
        cell.positions[0, 0] += 0.01
        row = {"a_A": a_of(element), "displacement_A": 0.01}
        labelled = [("supercell_2.5", (6, 6, 6)), ("density_8", (dense,) * 3)]
        labelled += [(f"mesh_{n}", (n,) * 3) for n in extra]
        for label, mesh in labelled:
            rec = meshes.record(cell, mesh)
            force = float(rec["forces"][0][0])
            phi = -force / 0.01  # eV/Å²
            mass = atomic_masses[cell.numbers[0]] * _amu
            nu = np.sqrt(2 * phi * _e * 1e20 / mass) / (2 * np.pi) / 1e12
            row[label] = {"mesh": list(mesh), "force_x_eV_per_A": force, "gamma_optical_THz": float(nu),
                          "wall_time_s": rec["wall_time_s"]}
        row["delta_gamma_optical_THz"] = (row["density_8"]["gamma_optical_THz"]
                                          - row["supercell_2.5"]["gamma_optical_THz"])
        row["force_change_percent"] = 100 * (row["density_8"]["force_x_eV_per_A"]
                                             / row["supercell_2.5"]["force_x_eV_per_A"] - 1)
        out[element] = row
    return out


def check_vacancy(dv, meshes, element, dense):
    a = a_of(element)
    perfect = dv.diamond(element, a, cubic=True).repeat(2)
    vacancy = perfect.copy()
    del vacancy[0]
    relaxed = meshes.context().relax(vacancy, cell=False, fmax=dv.Sizes().fmax)["atoms"]
    n = len(perfect)
    out = {"a_A": a, "n_sites": n}
    for label, mesh in (("v1", None), ("dense", (dense,) * 3)):
        e = {name: meshes.record(s, mesh) for name, s in
             (("perfect", perfect), ("unrelaxed", vacancy), ("relaxed", relaxed))}
        ref = (n - 1) / n * e["perfect"]["energy"]
        out[label] = {"mesh": [2, 2, 2] if mesh is None else list(mesh),
                      "formation_energy_unrelaxed_eV": e["unrelaxed"]["energy"] - ref,
                      "formation_energy_relaxed_eV": e["relaxed"]["energy"] - ref,
                      "wall_time_s": {k: v["wall_time_s"] for k, v in e.items()}}
    for key in ("formation_energy_unrelaxed_eV", "formation_energy_relaxed_eV"):
        out["delta_" + key] = out["dense"][key] - out["v1"][key]
    return out


def check_surface(dv, meshes, element):
    a = a_of(element)
    s = dv.Sizes()
    bulk = dv.diamond(element, a)
    flat = dv.slab_100(element, a, s.slab_layers, s.vacuum, dimers=False)
    seeded = dv.slab_100(element, a, s.slab_layers, s.vacuum, dimers=True)
    relaxed = meshes.context().relax(seeded, cell=False, fmax=s.fmax)["atoms"]
    from mlip.workflows.kpoints import kpoint_mesh

    out = {"a_A": a}
    for label, density in (("v1", None), ("density_8", 8.0)):
        def mesh(atoms):
            return None if density is None else kpoint_mesh(atoms, density)

        e_bulk = meshes.record(bulk, mesh(bulk))["energy"] / len(bulk)
        row = {"meshes": {}}
        for name, slab in (("1x1_unrelaxed", flat), ("2x1_relaxed", relaxed)):
            rec = meshes.record(slab, mesh(slab))
            area = float(np.linalg.norm(np.cross(slab.cell[0], slab.cell[1])))
            gamma = (rec["energy"] - len(slab) * e_bulk) / (2 * area) * dv.J_PER_M2
            row[f"gamma_100_{name}_J_per_m2"] = gamma
            row["meshes"][name] = list(kpoint_mesh(slab, 2.5 if density is None else density))
        row["meshes"]["bulk"] = list(kpoint_mesh(bulk, 2.5 if density is None else density))
        out[label] = row
    for key in ("gamma_100_1x1_unrelaxed_J_per_m2", "gamma_100_2x1_relaxed_J_per_m2"):
        out["delta_percent_" + key] = 100 * (out["density_8"][key] / out["v1"][key] - 1)
    return out


def check_elastic(dv, meshes, element, dense, pairs=("uniaxial", "shear", "relaxed")):
    """C11 and C12 (``uniaxial``), C44 clamped-ion (``shear``) and relaxed-ion (``relaxed``: the v1-relaxed
    sheared cells) on the v1 mesh and on ``dense``³; ``pairs`` chooses which (each pair is two SCFs)."""
    a = a_of(element)
    ctx = meshes.context()
    cell = dv.diamond(element, a)
    d = ctx.sizes.strain
    uniaxial, shear = np.zeros((3, 3)), np.zeros((3, 3))
    uniaxial[0, 0] = d
    shear[1, 2] = shear[2, 1] = d / 2
    cells = [dv.strained(cell, sign * strain) for strain in (uniaxial, shear) for sign in (1, -1)]
    with ctx.same_mesh(cells):
        relaxed = [ctx.relax(c, cell=False, fmax=ctx.sizes.elastic_fmax)["atoms"] for c in cells[2:]]
        structures = {"uniaxial": cells[:2], "shear": cells[2:], "relaxed": relaxed}
        v1 = {name: [meshes.v1_calc.evaluate(c)["stress"] for c in structures[name]] for name in pairs}
    dense_stress = {name: [meshes.record(c, (dense,) * 3)["stress"] for c in structures[name]]
                    for name in pairs}

    def slope(pair, index):
        return float((pair[0][index] - pair[1][index]) / (2 * d) / GPa)

    out = {"a_A": a, "strain": d}
    for label, stress, mesh in (("v1", v1, [5, 5, 5]), ("dense", dense_stress, [dense] * 3)):
        row = {"mesh": mesh}
        if "uniaxial" in stress:
            row["C11_GPa"] = slope(stress["uniaxial"], 0)
            row["C12_GPa"] = 0.5 * (slope(stress["uniaxial"], 1) + slope(stress["uniaxial"], 2))
        if "shear" in stress:
            row["C44_clamped_ion_GPa"] = slope(stress["shear"], 3)
        if "relaxed" in stress:
            row["C44_GPa"] = slope(stress["relaxed"], 3)
        out[label] = row
    out["delta_percent"] = {k: 100 * (out["dense"][k] / out["v1"][k] - 1) for k in out["v1"] if k != "mesh"}
    return out


#: issue 55's tolerances (those of ``equiformer_v3-sige``, the tighter): (kind, tolerance), kind
#: ``relative`` in per cent or ``absolute`` in the property's unit
TOLERANCES = {
    "lattice.{e}.a_A": ("relative", 0.2), "lattice.{e}.B_GPa": ("relative", 3.0),
    "elastic.{e}.C11_GPa": ("relative", 5.0), "elastic.{e}.C12_GPa": ("relative", 5.0),
    "elastic.{e}.C44_GPa": ("relative", 5.0),
    "phases.{e}.transition_pressures_GPa.diamond_to_beta_tin": ("relative", 10.0),
    "vacancy.{e}.formation_energy_relaxed_eV": ("absolute", 0.1),
    "surface.{e}.gamma_100_relaxed_2x1_J_per_m2": ("relative", 5.0),
    "phonons.{e}.gamma_optical_THz": ("absolute", 0.12),
}


def compare(key: str, coarse: float, dense: float, e: str) -> dict:
    """One row: both values, the difference and whether it exceeds the property's tolerance."""
    row = {"density_2.5": coarse, "converged": dense, "difference": dense - coarse,
           "difference_percent": 100 * (dense - coarse) / abs(coarse) if coarse else None}
    for pattern, (kind, tol) in TOLERANCES.items():
        if pattern.format(e=e) == key.removeprefix("check."):
            moved = abs(row["difference_percent"] if kind == "relative" else row["difference"])
            row.update(tolerance=tol, tolerance_kind=kind, exceeds_tolerance=bool(moved > tol))
    return row


def summarize(coarse_path: Path, dense_path: Path, checks_path: Path, commands: list) -> dict:
    """The density-2.5 (v1) and the converged GPAW numbers side by side, the mesh of each property, and
    which differences exceed issue 55's tolerances: the E–V and elastic numbers from the two reports,
    the big-cell properties from the checks."""
    from mlip.workflows.model_card import property_scalars

    coarse, dense = (json.loads(Path(p).read_text())["methods"]["gpaw"] for p in (coarse_path, dense_path))
    checks = json.loads(Path(checks_path).read_text()) if Path(checks_path).exists() else {}
    rows = {}
    mine, theirs = property_scalars(coarse["properties"]), property_scalars(dense["properties"])
    for key in sorted(set(mine) & set(theirs)):
        prop, element = key.split(".")[:2]
        overrides = dense["settings_by_property"].get(prop, {}).get(element, {}).get("overrides")
        if overrides and key.rsplit(".", 1)[-1] not in (
                "n_atoms", "strain", "fit_rms_meV_per_atom", "E0_eV_per_atom"):  # recomputed, a number
            rows[key] = compare(key, mine[key], theirs[key], element)
            rows[key]["meshes"] = {"density_2.5": coarse["stages"][prop][element]["kpoint_meshes"],
                                   "converged": dense["stages"][prop][element]["kpoint_meshes"]}
            rows[key]["source"] = f"dft_validation.py --converged: {overrides}"
    for element, value in checks.get("phonons", {}).items():
        if not isinstance(value, dict):
            continue
        key = f"phonons.{element}.gamma_optical_THz"
        rows[key] = compare(key, value["supercell_2.5"]["gamma_optical_THz"],
                            value["density_8"]["gamma_optical_THz"], element)
        rows[key]["meshes"] = {"density_2.5": value["supercell_2.5"]["mesh"],
                               "converged": value["density_8"]["mesh"]}
        rows[key]["source"] = "kpoint_checks.py phonons (2-atom cell, Γ optical mode)"
    # a check's row never replaces the converged run's own number of a property: it goes under "check."
    elastic = checks.get("elastic", {})
    for name in ("C11_GPa", "C12_GPa", "C44_GPa", "C44_clamped_ion_GPa"):
        if name in elastic.get("dense", {}):
            key = f"elastic.Si.{name}"
            key = f"check.{key}" if key in rows else key
            rows[key] = compare(key, elastic["v1"][name], elastic["dense"][name], "Si")
            rows[key]["meshes"] = {"density_2.5": elastic["v1"]["mesh"],
                                   "converged": elastic["dense"]["mesh"]}
            rows[key]["source"] = "kpoint_checks.py elastic (the v1 strained cells, v1 lattice constant)"
    for check, keys in (("vacancy", ("formation_energy_unrelaxed_eV", "formation_energy_relaxed_eV")),
                        ("surface", ("gamma_100_1x1_unrelaxed_J_per_m2", "gamma_100_2x1_relaxed_J_per_m2"))):
        value = checks.get(check)
        if not value:
            continue
        lo, hi = ("v1", "dense") if check == "vacancy" else ("v1", "density_8")
        for name in keys:
            prop_key = name.replace("gamma_100_1x1_unrelaxed", "gamma_100_unrelaxed_1x1").replace(
                "gamma_100_2x1_relaxed", "gamma_100_relaxed_2x1")
            key = f"{check}.Si.{prop_key}"
            key = f"check.{key}" if key in rows else key
            rows[key] = compare(key, value[lo][name], value[hi][name], "Si")
            rows[key]["meshes"] = {"density_2.5": value[lo].get("mesh") or value[lo].get("meshes"),
                                   "converged": value[hi].get("mesh") or value[hi].get("meshes")}
            rows[key]["source"] = f"kpoint_checks.py {check} (v1-relaxed geometry)"
    cost = Path(checks_path).parent / "v1-cost-by-stage.json"  # cost_by_stage.py
    return {"benchmark": "dft_validation at converged k-points (issue 55 item 3)", "commands": commands,
            "v1_cost_by_stage": json.loads(cost.read_text()) if cost.exists() else None,
            "density_2.5_key": coarse["key"], "converged_key": dense["key"],
            "settings_by_property": {p: {e: x["overrides"] for e, x in v.items()}
                                     for p, v in dense.get("settings_by_property", {}).items()},
            "rows": rows, "checks": checks,
            "not_in_the_converged_cache": {f"{p}.{e}": v["error"].splitlines()[0]
                                           for p, per in dense["properties"].items() for e, v in per.items()
                                           if isinstance(v, dict) and "error" in v},
            "checks_not_done": [c for c in CHECKS if c not in checks]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--checks", nargs="+", default=list(CHECKS), choices=CHECKS)
    p.add_argument("--summarize", nargs=3, metavar=("V1_JSON", "CONVERGED_JSON", "OUT_JSON"),
                   help="no calculation: compare two dft_validation reports and the checks into OUT_JSON")
    p.add_argument("--command", action="append", default=[], help="--summarize: a command to record")
    p.add_argument("--elements", nargs="+", default=["Si", "Ge"],
                   help="of the phonon check (the others are Si's: the v1 validation computed them for Si)")
    p.add_argument("--phonon-mesh", type=int, default=18, help="the dense primitive mesh of the phonon check")
    p.add_argument("--phonon-extra-meshes", type=int, nargs="*", default=[],
                   help="more primitive meshes N (N³) of the phonon check, each recorded as mesh_N: which mesh "
                        "the 54-atom supercell (N/3)³ needs")
    p.add_argument("--vacancy-mesh", type=int, default=3)
    p.add_argument("--elastic-mesh", type=int, default=16)
    p.add_argument("--elastic-pairs", nargs="+", default=["uniaxial", "shear", "relaxed"],
                   choices=["uniaxial", "shear", "relaxed"],
                   help="which strained pairs the elastic check takes")
    args = p.parse_args(argv)
    if args.summarize:
        from mlip.io import write_json

        v1, converged, out = args.summarize
        summary = summarize(Path(v1), Path(converged), HERE / "kpoint-checks" / "kpoint_checks.json",
                            args.command)
        write_json(Path(out), summary)
        for key, row in summary["rows"].items():
            print(f"{key}: {row['density_2.5']:.4g} → {row['converged']:.4g} "
                  f"({row['difference']:+.3g}; exceeds: {row.get('exceeds_tolerance')})")
        return summary
    with load_validation() as dv:
        ranks = dv.Ranks(mpi=True)
        meshes = Meshes(dv, ranks)
        path = HERE / "kpoint-checks" / "kpoint_checks.json"
        report = json.loads(path.read_text()) if path.exists() and ranks.writer else {}
        report = ranks.share(report)
        for check in args.checks:
            t0 = time.perf_counter()
            if check == "phonons":
                value = check_phonons(dv, meshes, args.elements, args.phonon_mesh, args.phonon_extra_meshes)
            elif check == "vacancy":
                value = check_vacancy(dv, meshes, "Si", args.vacancy_mesh)
            elif check == "surface":
                value = check_surface(dv, meshes, "Si")
            else:
                value = check_elastic(dv, meshes, "Si", args.elastic_mesh, args.elastic_pairs)
            value["seconds_this_run"] = time.perf_counter() - t0
            if check == "phonons":  # per element: a run for one element keeps the others' rows
                value = {**report.get(check, {}), **value}
            report[check] = value
            if ranks.writer:
                from mlip.io import write_json

                write_json(path, report)
                print(check, json.dumps(value, indent=1), flush=True)
    return report


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
