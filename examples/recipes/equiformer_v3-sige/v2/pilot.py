"""Which start and rate to fine-tune the v2 model from (issue 55): a pilot at equal CPU before the long run.

    python examples/datasets/sige-pbe/v2/assemble.py
    OMP_NUM_THREADS=1 python examples/recipes/equiformer_v3-sige/v2/pilot.py \
        --out examples/datasets/sige-pbe/work/v2/pilot --epochs 150 --json RECORD.json

Every arm is ``finetune.yaml`` with another ``init_from``, learning rate, training or validation file
(the ``-replay`` forms add v1's forces: assemble.py) or loss weights (:data:`ARMS`), its validation file
picking the best epoch (eager, not compiled: the runs are short), for ``--epochs`` at most (the plateau
rule may end one earlier; each arm's minutes are recorded: a replay epoch costs about 6× one on the v2 file
alone). Each arm's best weights are then scored on the v2 test file (float64), overall, on its periodic
structures and per config_type, beside the starting checkpoints as they are; its last weights too, and
how well both fit the v2 training file (``train_fit``). A finished arm is not
trained again (rerun the command after a stop: an arm stopped mid-run resumes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
V1 = "examples/datasets/sige-pbe/v2/learn/pretrained.safetensors"  # the shipped v1 model, frozen
TEACHER = "examples/recipes/equiformer_v3-sige/v2/teacher-run/best.safetensors"
#: name → (init_from, learning rate, training file's suffix[, validation file's suffix[, loss overrides]]);
#: ``{out}`` in init_from is the pilot's folder (--out), where an arm finds another arm's weights:
#: "-replay" adds v1's periodic structures without a v2 label, weighted for forces only (assemble.py); a
#: validation file with them sees forgetting on ~100 frames instead of v2's ~20
ARMS = {"v1-lr1e-3": (V1, 1e-3, ""), "v1-lr3e-4": (V1, 3e-4, ""), "teacher-lr1e-3": (TEACHER, 1e-3, ""),
        "v1-replay-lr3e-4": (V1, 3e-4, "-replay"),
        "v1-replay-validreplay-lr3e-4": (V1, 3e-4, "-replay", "-replay"),
        "v1-replay-lr1e-4": (V1, 1e-4, "-replay"), "v1-replay-lr3e-5": (V1, 3e-5, "-replay"),
        "v1-replay-energy10-lr3e-4": (V1, 3e-4, "-replay", "", {"energy_weight": 10.0}),
        "v1-replay-validnocompressed-lr3e-4": (V1, 3e-4, "-replay", "-nocompressed"),
        # the recipe's energy weight leaves the training energies unfitted (README.md, "Energies"): heavier ones
        "v1-replay-energy30-lr3e-4": (V1, 3e-4, "-replay", "", {"energy_weight": 30.0}),
        "v1-replay-energy100-lr3e-4": (V1, 3e-4, "-replay", "", {"energy_weight": 100.0}),
        # the energy term quadratic up to 32 meV/atom (δ × the output scale), not linear from 10
        "v1-replay-energy30-delta0.01-lr3e-4": (V1, 3e-4, "-replay", "", {"energy_weight": 30.0, "huber_delta": 0.01}),
        # a second stage from the weight-30 arm's last weights: energies weighed 300 at a tenth of the rate
        "energy30-then-energy300-lr3e-5": ("{out}/v1-replay-energy30-lr3e-4/last.safetensors", 3e-5, "-replay", "",
                                           {"energy_weight": 300.0})}
V2 = "examples/datasets/sige-pbe/work/v2/sige-pbe-v2"
#: the group of the periodic structures in score() (no config_type is named so)
PERIODIC = "<periodic>"


def arm(name: str):
    """ARMS[name] with its defaults: (init_from, lr, training suffix, validation suffix, loss overrides)."""
    defaults = (None, None, "", "", {})
    spec = ARMS[name]
    return (*spec, *defaults[len(spec):])


def write_valid_without_compressed() -> None:
    """``{V2}-valid-nocompressed.xyz``: the v2 validation file with its compressed frames weighted 0
    (``config_weight``), for the arm that validates without them (README.md)."""
    from ase.io import read, write

    from mlip.io import atomic_write

    frames = read(ROOT / f"{V2}-valid.xyz", ":")
    for atoms in frames:
        if atoms.info.get("config_type") == "compressed":
            atoms.info["config_weight"] = 0.0
    atomic_write(ROOT / f"{V2}-valid-nocompressed.xyz", lambda tmp: write(tmp, frames, format="extxyz"))


def arm_config(name: str, out: Path, epochs: int) -> Path:
    """The arm's config, written into its folder: finetune.yaml with its start, rate and length."""
    init_from, lr, suffix, valid_suffix, loss = arm(name)
    if valid_suffix == "-nocompressed":
        write_valid_without_compressed()
    config = yaml.safe_load((HERE / "finetune.yaml").read_text())
    config["loss"].update(loss)
    init_from = ROOT / init_from.format(out=out.resolve())  # {out}: where this arm's run goes too
    config.update(init_from=str(init_from), epochs=epochs, compile=False, out_dir=str(out / name),
                  data={"train": str(ROOT / f"{V2}-train{suffix}.xyz"),
                        "valid": str(ROOT / f"{V2}-valid{valid_suffix}.xyz")})
    config["optimizer"]["lr"] = lr
    path = out / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def score(checkpoint: Path, test) -> dict:
    """Errors on the test file (float64): all, periodic only, per config_type (one prediction pass)."""
    from mlip.checkpoint import load_potential
    from mlip.training.evaluation import evaluate_groups

    def groups_of(sample):  # its config_type, and PERIODIC for a structure with a periodic direction
        kind = sample.atoms.info.get("config_type", "?")
        return [kind, PERIODIC] if sample.atoms.pbc.any() else [kind]

    overall, groups = evaluate_groups(load_potential(checkpoint), test, groups_of, batch_size=16,
                                      dtype="float64")
    n_periodic, periodic = groups.pop(PERIODIC, (0, {}))
    keys = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3")
    return {"all": {k: overall[k] for k in keys},
            "periodic": {"n": n_periodic, **{k: periodic.get(k) for k in keys}},
            "by_config_type": {kind: {"n": n, **{k: m.get(k) for k in keys[:2]}}
                               for kind, (n, m) in sorted(groups.items())}}


def fit(scores: dict) -> dict:
    """The training-file part of an arm's record: all frames and the periodic ones (energy, forces)."""
    keys = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A")
    return {part: {k: scores[part][k] for k in keys} for part in ("all", "periodic")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder of the arms' runs")
    parser.add_argument("--epochs", type=int, default=150, help="epochs at most per arm (equal CPU)")
    parser.add_argument("--only", nargs="*", choices=sorted(ARMS), default=sorted(ARMS),
                        help="arms to train and score (a finished arm is scored as it ended)")
    parser.add_argument("--json", default=None, help="the record")
    args = parser.parse_args(argv)
    from mlip.data import read_dataset

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    test = list(read_dataset(ROOT / f"{V2}-test.xyz"))
    train = list(read_dataset(ROOT / f"{V2}-train.xyz"))
    record = {"command": "OMP_NUM_THREADS=1 python examples/recipes/equiformer_v3-sige/v2/pilot.py "
                         "--out OUT --epochs N --only ARM... (each arm's cap in its entry)",
              "n_train": len(train), "n_train_periodic": sum(bool(x.atoms.pbc.any()) for x in train),
              "n_valid": len(read_dataset(ROOT / f"{V2}-valid.xyz")), "n_test": len(test),
              "starts": {"v1 model": score(ROOT / V1, test), "teacher-run": score(ROOT / TEACHER, test)},
              "arms": {}}
    for name in args.only:
        run = out / name
        if not (run / "done").exists():
            config = arm_config(name, out, args.epochs)
            print(f"== {time.strftime('%H:%M:%S')} {name}", flush=True)
            resume = ["--resume"] if (run / "train_state.safetensors").exists() else []
            subprocess.run([sys.executable, "-m", "mlip", "train", str(config), "--no-progress", *resume],
                           check=True)
            (run / "done").write_text("")
        history = json.loads((run / "metrics.json").read_text())
        init_from, lr, suffix, valid_suffix, loss = arm(name)
        record["arms"][name] = {"init_from": init_from, "lr": lr, "train": f"sige-pbe-v2-train{suffix}.xyz",
                                "valid": f"sige-pbe-v2-valid{valid_suffix}.xyz", "loss_overrides": loss,
                                "epochs_cap": json.loads((run / "config.json").read_text())["epochs"],
                                "epochs": len(history),
                                "minutes": history[-1].get("minutes"), "stopped": history[-1].get("stopped"),
                                "test": score(run / "best.safetensors", test),
                                "test_last_epoch": score(run / "last.safetensors", test),
                                # how well the arm fits what it was trained on (the v2 labels, not the replay)
                                "train_fit": {which: fit(score(run / f"{which}.safetensors", train))
                                              for which in ("best", "last")}}
        a = record["arms"][name]["test"]
        print(f"{name}: {len(history)} epochs; test E {a['all']['energy_mae_meV_per_atom']:.1f} meV/atom, "
              f"F {a['all']['forces_mae_meV_per_A']:.1f} meV/Å (periodic "
              f"{a['periodic']['forces_mae_meV_per_A']:.1f})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
