"""What the v1 Si–Ge structures lack (issue 55, item 4), made once as ``additions.xyz`` for the v2 labels
(plan.py puts them into the value order) and for pre-training on a teacher's
labels.

    python examples/datasets/sige-pbe/v2/additions.py        # about 10 CPU minutes

Two kinds, each frame with ``config_type``, ``id``, ``group`` (one MD trajectory, one path) and
``prototype``, like the v1 structures (:mod:`mlip.data.structures`; a group is one MD trajectory or one point
of a path at its two volumes):

* ``md_crystal``: thermal snapshots of diamond-structure crystals, where κ, phonons and elastic constants
  live and where v1 has only random rattles: Si, Ge, zincblende SiGe and random Si–Ge alloys
  (Si₆Ge₂, Si₄Ge₄, Si₂Ge₆) in the 8-atom cubic cell, each at 300, 600 and 900 K. The lattice constant
  is GPAW's PBE value of the pure elements (Si 5.477 Å, Ge 5.779 Å, the v1 validation at density 2.5,
  ``benchmarks/results/dft-validation-sige-foundation-2026-12-04.json``; density 8 gives 5.476 and
  5.769 Å, 0.2 % less for Ge, well inside the thermal spread), linear in the Ge fraction
  (Vegard), thermal expansion left out (a few tenths of a percent at 900 K: the stress labels record it).
  Langevin MD (1 fs, friction 0.01 fs⁻¹) driven by the shipped ``equiformer_v3-sige`` (float32): the
  driver only has to produce plausible thermal displacements, the labels are GPAW's, and against the same
  GPAW its phonons are off by 0.34 THz where SevenNet-0's are off by 1.79 (its card), at a tenth of
  SevenNet-0's cost per step on this CPU. 400 steps to
  equilibrate, then :data:`SNAPSHOTS` snapshots 200 fs apart (three periods of Si's optical phonon at
  15 THz: decorrelated).
* ``transition_path``: the diamond → β-Sn path of Si and Ge, on which the transition pressure (a target
  of the issue) depends and which v1 samples only at its two ends. Both phases are the same structure
  (I4₁/amd, atoms at (0, 0, 0) and (0, ½, ¼) of a body-centred tetragonal cell): diamond has c/a = √2,
  β-Sn c/a = 0.538 at 0.751 of diamond's volume (GPAW PBE for Si, the same validation). The path
  interpolates c/a and the volume linearly in :data:`PATH_POINTS` steps, at two volumes each (the path's
  and 8 % smaller, for the pressure), in the 4-atom tetragonal cell; the ideal cells keep their
  symmetry, which makes their k-point meshes cheap.

The frames depend only on the seed: rerunning writes the same file (it refuses to overwrite a different
one).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import List

import numpy as np

HERE = Path(__file__).resolve().parent
A_PBE = {"Si": 5.476791632167847, "Ge": 5.7790141813702585}
BETA_TIN_C_OVER_A, BETA_TIN_VOLUME_RATIO = 0.5383317616193214, 0.7508907629994764
#: (ordering, Si atoms of 8): Si, Ge, zincblende SiGe, random Si6Ge2, Si4Ge4, Si2Ge6
COMPOSITIONS = (("diamond", 8), ("diamond", 0), ("zincblende", 4), ("diamond", 6), ("diamond", 4),
                ("diamond", 2))
TEMPERATURES_K = (300.0, 600.0, 900.0)
SNAPSHOTS, EQUILIBRATION_STEPS, INTERVAL_STEPS, TIMESTEP_FS, FRICTION_PER_FS = 4, 400, 200, 1.0, 0.01
PATH_POINTS, PATH_COMPRESSION = 7, 0.92


def diamond_cell(n_si: int, zincblende: bool, rng: np.random.Generator):
    """The 8-atom cubic diamond cell with ``n_si`` Si atoms (the rest Ge) at the Vegard lattice constant;
    zincblende orders them on the two sublattices, otherwise they are placed at random."""
    from ase.build import bulk

    x_ge = 1 - n_si / 8
    a = (1 - x_ge) * A_PBE["Si"] + x_ge * A_PBE["Ge"]
    atoms = bulk("Si", "diamond", a=a, cubic=True)
    if zincblende:
        symbols = ["Si" if i % 2 == 0 else "Ge" for i in range(8)]  # ASE's order alternates sublattices
        fcc = bulk("Si", "fcc", a=a, cubic=True).get_scaled_positions().round(3).tolist()
        if sorted(atoms.get_scaled_positions()[::2].round(3).tolist()) != sorted(fcc):
            raise RuntimeError("ASE's cubic diamond cell no longer alternates its two sublattices")
    else:
        symbols = ["Si"] * n_si + ["Ge"] * (8 - n_si)
        symbols = [symbols[i] for i in rng.permutation(8)]
    atoms.set_chemical_symbols(symbols)
    return atoms


def md_crystal_frames(calculator, seed: int) -> List:
    from ase import units
    from ase.constraints import FixCom
    from ase.md.langevin import Langevin
    from ase.md import velocitydistribution

    frames, k = [], 0
    for ordering, n_si in COMPOSITIONS:
        for temperature in TEMPERATURES_K:
            rng = np.random.default_rng([seed, 1, k])
            zincblende = ordering == "zincblende"
            atoms = diamond_cell(n_si, zincblende, rng)
            atoms.calc = calculator
            thermalize = getattr(velocitydistribution, "thermalize_momenta", None)  # ASE >= 3.29
            if thermalize is not None:
                thermalize(atoms, temperature, rng=rng)
            else:
                velocitydistribution.MaxwellBoltzmannDistribution(atoms, temperature_K=temperature, rng=rng)
            atoms.set_constraint(FixCom())
            dyn = Langevin(atoms, TIMESTEP_FS * units.fs, temperature_K=temperature,
                           friction=FRICTION_PER_FS / units.fs, fixcm=False,
                           rng=np.random.default_rng([seed, 2, k]))
            dyn.run(EQUILIBRATION_STEPS)
            group = f"md_crystal-{k:05d}"
            for j in range(SNAPSHOTS):
                dyn.run(INTERVAL_STEPS)
                snap = atoms.copy()
                snap.calc = None
                snap.set_constraint()
                snap.wrap()
                snap.info = {"config_type": "md_crystal", "id": f"{group}-{j}", "group": group,
                             "prototype": "zincblende" if zincblende else "diamond",
                             "temperature_K": temperature}
                frames.append(snap)
            print(f"{group}: {snap.get_chemical_formula()} at {temperature:.0f} K", flush=True)
            k += 1
    return frames


def transition_path_frames() -> List:
    from ase import Atoms

    frames, k = [], 0
    for element in ("Si", "Ge"):
        v_diamond = A_PBE[element] ** 3 / 8
        for step in range(PATH_POINTS):
            group = f"transition_path-{k:05d}"  # one point of one path, at its two volumes
            t = step / (PATH_POINTS - 1)
            c_over_a = math.sqrt(2) + t * (BETA_TIN_C_OVER_A - math.sqrt(2))
            volume = v_diamond * (1 + t * (BETA_TIN_VOLUME_RATIO - 1))
            for scale in (1.0, PATH_COMPRESSION):
                a = (4 * volume * scale / c_over_a) ** (1 / 3)  # 4 atoms in a × a × c
                atoms = Atoms(element * 4, cell=[a, a, c_over_a * a], pbc=True,
                              scaled_positions=[[0, 0, 0], [0, 0.5, 0.25], [0.5, 0.5, 0.5],
                                                [0.5, 0, 0.75]])
                atoms.info = {"config_type": "transition_path", "id": f"{group}-{len(frames) % 2}",
                              "group": group, "prototype": "diamond_to_beta_tin",
                              "path_fraction": round(t, 6), "volume_scale": scale}
                frames.append(atoms)
            k += 1
    return frames


def main(argv=None) -> None:
    from ase.io import read, write

    from mlip.io import atomic_write

    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("-o", "--out", type=Path, default=HERE / "additions.xyz")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import torch

    from mlip import load_calculator

    torch.set_num_threads(1)  # 8 atoms: a second thread only waits (and burns the CPU the labels need)
    driver = load_calculator("equiformer_v3-sige", device="cpu", dtype="float32")
    frames = md_crystal_frames(driver, args.seed) + transition_path_frames()
    if args.out.exists():
        old = read(args.out, ":")
        same = len(old) == len(frames) and all(
            a.info["id"] == b.info["id"] and np.allclose(a.positions, b.positions, atol=1e-6)
            for a, b in zip(old, frames))
        if not same:
            sys.exit(f"{args.out} exists with other frames; it is kept (move it away to make a new one)")
        print(f"{args.out}: unchanged ({len(frames)} frames)")
        return
    atomic_write(args.out, lambda tmp: write(tmp, frames, format="extxyz"))
    print(f"{args.out}: {len(frames)} frames")


if __name__ == "__main__":
    main()
