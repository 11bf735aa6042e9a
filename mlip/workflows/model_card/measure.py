"""The numbers a model card measures: test errors, the card sample, rotation behaviour, the share of the
network beside an embedded-atom term, MD-step speed and training throughput.

Every error is measured in float64 and every speed in float32 on the CPU, as the shipped cards state.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import List

import numpy as np
import torch

#: the unit of each quantity's errors
UNIT = {"energy": "meV/atom", "forces": "meV/Å", "stress": "meV/Å³"}
#: each quantity's MAE among the metrics of :func:`errors` (``mae`` → ``rmse`` for the RMSE)
KEYS = {"energy": "energy_mae_meV_per_atom", "forces": "forces_mae_meV_per_A",
        "stress": "stress_mae_meV_per_A3"}


def errors(potential, samples) -> dict:
    """Test errors of ``potential`` on ``samples`` in float64 (:func:`mlip.training.evaluate`'s metrics)."""
    from mlip.training.evaluation import evaluate

    return evaluate(potential, samples, batch_size=16, dtype="float64")


def card_sample(counts, seed: int):
    """The card sample: ``generate_emt_dataset(counts, seed)`` with counts per category (a dict), so that
    the same frames come back when the generator gains a category."""
    from mlip.data.emt import generate_emt_dataset

    return generate_emt_dataset(counts, seed=seed, progress=False)


def card_sample_of(card: dict, root: Path):
    """The samples of a card's ``card_sample``: its ``file`` (a labelled file, path relative to the
    repository ``root``) or the EMT generator's ``counts`` and ``seed``."""
    sample = card["card_sample"]
    if "file" in sample:
        from mlip.data import read_dataset

        return list(read_dataset(root / sample["file"]))
    return card_sample(sample["counts"], sample["seed"])


def rotation_spread(potential, samples, n_rotations: int = 8, seed: int = 0) -> dict:
    """How far the model is from rotation invariance (float64), over ``samples``: the energy
    spread (max − min, meV/atom) and the force error after rotating back (MAE, meV/Å) over random
    rotations. Exactly 0 (rounding) for EquiformerV3; learned by augmentation for the Platonic
    Transformer, which is exactly invariant only to its finite group."""
    from mlip.calculators import MLIPCalculator
    from mlip.training.augmentation import random_rotation
    from mlip.training.samples import atoms_of

    calc = MLIPCalculator(potential, dtype="float64", device="cpu")
    rng = np.random.default_rng(seed)
    spreads, force_errors = [], []
    for sample in samples:
        atoms = atoms_of(sample).copy()
        atoms.calc = calc
        e0, f0 = atoms.get_potential_energy(), atoms.get_forces()
        energies = [e0]
        for _ in range(n_rotations):
            rot = random_rotation(rng)
            turned = atoms.copy()
            turned.set_cell(np.asarray(atoms.cell) @ rot.T)
            turned.positions = atoms.positions @ rot.T
            turned.calc = calc
            energies.append(turned.get_potential_energy())
            force_errors.append(np.abs(turned.get_forces() @ rot - f0).mean())
        spreads.append((max(energies) - min(energies)) / len(atoms))
    return {"energy_spread_meV_per_atom_mean": 1e3 * float(np.mean(spreads)),
            "energy_spread_meV_per_atom_max": 1e3 * float(np.max(spreads)),
            "forces_mae_meV_per_A": 1e3 * float(np.mean(force_errors)),
            "n_structures": len(samples), "n_rotations": n_rotations}


def embedded_atom_share(weights: Path, samples) -> dict | None:
    """What the network adds to its embedded-atom term (float64), for a model with the term (``terms``):
    the same weights with the final readout zeroed (``model.final_readout()``, the layer that
    ``init_embedded_atom_from`` zeroes) leave the term alone, as trained inside the model. Returns the
    mean absolute change of the energy (meV/atom) and of the force components (meV/Å) over ``samples``,
    and the term-alone errors on them; ``None`` for a model without the term."""
    from mlip.calculators import MLIPCalculator
    from mlip.checkpoint import load_potential
    from mlip.training.samples import atoms_of

    full = load_potential(weights)
    if "embedded_atom" not in full.terms or not hasattr(full.model, "final_readout"):
        return None  # no term, or nothing but the term (the embedded_atom architecture)
    term = load_potential(weights)
    with torch.no_grad():
        for param in term.model.final_readout().parameters():
            param.zero_()
    calcs = [MLIPCalculator(p, dtype="float64", device="cpu") for p in (full, term)]
    de, df = [], []
    for sample in samples:
        atoms = atoms_of(sample).copy()
        (e_full, f_full), (e_term, f_term) = [
            (c.get_potential_energy(atoms), c.get_forces(atoms)) for c in calcs]
        de.append(abs(e_full - e_term) / len(atoms))
        df.append(np.abs(f_full - f_term).mean())
    return {"network_energy_meV_per_atom_mean_abs": 1e3 * float(np.mean(de)),
            "network_forces_meV_per_A_mean_abs": 1e3 * float(np.mean(df)),
            "term_alone": {key: value for key, value in errors(term, samples).items()
                           if key in KEYS.values()},
            "n_structures": len(samples)}


def md_step_speed(potential, atoms, repeats: int = 10, compile: bool = False) -> float:
    """atom·steps/s of energy + forces + stress in float32 (median of ``repeats`` calls after two
    untimed ones, which include the compilation with ``compile``)."""
    from mlip.calculators import MLIPCalculator

    calc = MLIPCalculator(potential, dtype="float32", device="cpu", compile=compile)
    times = []
    for k in range(repeats + 2):
        atoms.positions[0, 0] += 1e-4  # a new geometry each call, as in MD
        t0 = time.perf_counter()
        calc.calculate(atoms, ["energy", "forces", "stress"], ["positions"])
        if k >= 2:
            times.append(time.perf_counter() - t0)
    return len(atoms) / float(np.median(times))


#: the cells whose MD step is timed, by kind: (element, structure, a, repeat) of the pure cell, then
#: (host, guest, structure, a, repeat) of the half-and-half solid solution
#: (``benchmarks/accuracy/mace_baseline.py --md-cells`` times the same cells, so that a card's speed and
#: its MACE comparison are of one pair)
MD_CELLS = {"cu-au": (("Cu", "fcc", 3.61, 4), ("Cu", "Au", "fcc", 3.75, 5)),
            "si-ge": (("Si", "diamond", 5.47, 3), ("Si", "Ge", "diamond", 5.62, 4))}


def md_cells(kind: str = "cu-au") -> list:
    """The two cells of :data:`MD_CELLS` ``kind``: a pure crystal and a rattled 50 % solid solution
    (the guest on half the sites, drawn with a fixed seed)."""
    from ase.build import bulk

    (element, structure, a, n), (host, guest, alloy_structure, a_alloy, m) = MD_CELLS[kind]
    pure = bulk(element, structure, a=a, cubic=True).repeat(n)
    alloy = bulk(host, alloy_structure, a=a_alloy, cubic=True).repeat(m)
    rng = np.random.default_rng(0)
    symbols = np.array(alloy.get_chemical_symbols())
    symbols[rng.permutation(len(alloy))[: len(alloy) // 2]] = guest
    alloy.set_chemical_symbols(symbols.tolist())
    alloy.rattle(0.05, seed=1)
    return [pure, alloy]


def speed_structures(kind: str = "cu-au") -> dict:
    """The two cells of the card's MD-step speed, by label. ``cu-au``: the EMT cards' fcc Cu and Cu–Au
    solid solution; ``si-ge``: the diamond Si and Si–Ge cells of :func:`md_cells` (those
    ``benchmarks/accuracy/mace_baseline.py --md-cells si-ge`` times)."""
    if kind == "si-ge":
        si, sige = md_cells("si-ge")
        return {f"diamond Si, {len(si)} atoms": si, f"Si-Ge solid solution, {len(sige)} atoms": sige}
    from ase.build import bulk

    cu = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(4)  # 256 atoms
    cuau = bulk("Cu", "fcc", a=3.75, cubic=True).repeat(5)  # 500 atoms
    rng = np.random.default_rng(0)
    cuau.numbers[rng.random(len(cuau)) < 0.5] = 79
    cuau.rattle(0.05, seed=1)
    return {"fcc Cu, 256 atoms": cu, "Cu-Au solid solution, 500 atoms": cuau}


def training_throughput(n_train: int, epochs: int, minutes: float) -> float:
    """Structures per second over the whole training (validation passes included)."""
    return n_train * epochs / (60.0 * minutes)


def training_stages(run_dirs: List[Path]) -> List[dict]:
    """One entry per training stage, in order, from each run folder's ``metrics.json`` (one line per
    epoch) and the header of its ``best.safetensors`` (the config and validation errors of the best epoch)."""
    import json

    from mlip.checkpoint import read_header

    stages = []
    for stage_dir in run_dirs:
        stage_history = json.loads((stage_dir / "metrics.json").read_text())
        stage_meta = read_header(stage_dir / "best.safetensors")["metadata"]
        c = stage_meta["training"]["config"]
        loss = c["loss"]
        stages.append({"run_dir": stage_dir.name, "epochs": len(stage_history),
                       "minutes": stage_history[-1]["minutes"],
                       "best_epoch": int(stage_meta.get("epoch", len(stage_history))),
                       "loss": [loss["energy_weight"], loss["forces_weight"], loss["stress_weight"]],
                       "lr": c["optimizer"]["lr"], "init_from": c.get("init_from"),
                       "init_embedded_atom_from": c.get("init_embedded_atom_from"),
                       "model": c["model"]["name"],
                       "validation": {key: stage_meta["metrics"][f"valid_{key}"] for key in KEYS.values()}})
    return stages
