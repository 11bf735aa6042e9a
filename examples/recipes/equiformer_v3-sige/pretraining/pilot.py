"""Pilot: pre-training on SevenNet-0's labels then fine-tuning on GPAW's, against training on GPAW's labels
from scratch, at (about) equal CPU time (pretraining/README.md).

Each arm runs in its own process on one thread, so the two can run side by side on a 2-core machine that
other jobs load: the compute of an arm is its process CPU time, not the wall time. An arm is a list of
stages; the same epochs per stage (the teacher set has the training structures of the GPAW set) make the
arms' compute equal by construction, and the CPU minutes of each stage are measured and recorded:

    python examples/recipes/equiformer_v3-sige/pretraining/pilot.py arm pretrain --epochs 10 ...
    python examples/recipes/equiformer_v3-sige/pretraining/pilot.py arm scratch --epochs 10 ...
    python examples/recipes/equiformer_v3-sige/pretraining/pilot.py report ...

``arm pretrain``: stage1.yaml (teacher labels, EPOCHS) then stage2.yaml (GPAW labels, EPOCHS) from its best
weights; ``arm scratch``: ../stage1.yaml (the recipe, GPAW labels) for 2 × EPOCHS. ``report`` measures each
arm's best weights on the test split in float64 and writes the JSON record (--results).
"""

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]  # the repository
ARMS = {"pretrain": [(HERE / "stage1.yaml", "teacher", 1), (HERE / "stage2.yaml", "gpaw", 1)],
        "scratch": [(HERE.parent / "stage1.yaml", "gpaw", 2)]}  # (config, labels, epochs in units of EPOCHS)


def run_arm(name: str, epochs: int, data_dir: Path, teacher_dir: Path, out: Path) -> dict:
    """Train the stages of arm ``name`` in OUT/NAME/ on one thread; returns its record (also ARM.json)."""
    import torch

    from mlip.data import read_dataset
    from mlip.io import write_json
    from mlip.training import TrainConfig, train

    torch.set_num_threads(1)
    folder = {"teacher": teacher_dir, "gpaw": data_dir}
    record = {"arm": name, "threads": torch.get_num_threads(), "stages": []}
    previous = None
    for path, labels, units in ARMS[name]:
        config = TrainConfig.from_yaml(path)
        config.epochs = units * epochs
        config.out_dir = str(out / name / path.stem if name == "pretrain" else out / name / "stage1")
        if config.init_from:
            config.init_from = str(previous)
        train_set = read_dataset(folder[labels] / config.data.train)
        valid_set = read_dataset(folder[labels] / config.data.valid)
        cpu, wall = time.process_time(), time.perf_counter()
        result = train(config, train_samples=train_set, valid_samples=valid_set, progress=False)
        stage = {"config": str(path.relative_to(ROOT)), "labels": labels, "epochs": config.epochs,
                 "cpu_minutes": (time.process_time() - cpu) / 60, "wall_minutes": (time.perf_counter() - wall) / 60,
                 "best_epoch": min(result.history, key=lambda h: h["valid_loss"])["epoch"],
                 "valid_last": {k: v for k, v in result.history[-1].items() if "mae" in k}}
        record["stages"].append(stage)
        print(f"{name}: {path.name} on {labels} labels, {config.epochs} epochs, {stage['cpu_minutes']:.2f} CPU min "
              f"({stage['wall_minutes']:.2f} wall)", flush=True)
        previous = result.best
        write_json(out / f"{name}.json", record)
    record["best"] = str(Path(previous).relative_to(out))
    record["cpu_minutes"] = sum(s["cpu_minutes"] for s in record["stages"])
    write_json(out / f"{name}.json", record)
    return record


def _arm_record(out: Path, name: str) -> dict:
    """The arm's record; for an arm still running (stopped by a deadline), its stage in progress: the best
    weights so far, the epochs done and the process's CPU time so far (from OUT/ARM.pid), marked partial."""
    path = out / f"{name}.json"
    record = json.loads(path.read_text()) if path.is_file() else {"arm": name, "stages": []}
    for stage in record["stages"]:  # written by a first version relative to examples/
        stage["config"] = re.sub(r"^recipes/", "examples/recipes/", stage["config"])
    if "best" in record:
        return record
    done = len(record["stages"])
    folder = out / name / ARMS[name][done][0].stem if name == "pretrain" else out / name / "stage1"
    epochs = len(json.loads((folder / "metrics.json").read_text()))
    pid = (out / f"{name}.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") / 60  # utime + stime
    record["stages"].append({"config": str(ARMS[name][done][0].relative_to(ROOT)), "partial": True,
                             "epochs_done": epochs,
                             "cpu_minutes": cpu - sum(s["cpu_minutes"] for s in record["stages"])})
    record.update(best=str((folder / "best.safetensors").relative_to(out)), cpu_minutes=cpu, partial=True)
    return record


def report(out: Path, data_dir: Path, results: Path, command: str) -> None:
    """Each arm's best weights on the test split (float64), beside its stages, into ``results``."""
    from mlip.checkpoint import load_potential
    from mlip.data import read_dataset
    from mlip.io import write_json
    from mlip.training.evaluation import evaluate

    test = read_dataset(data_dir / "sige-pbe-test.xyz")
    arms = {}
    for name in ARMS:
        record = _arm_record(out, name)
        metrics = evaluate(load_potential(out / record["best"]), test, 8, "float64", "cpu")
        record["test"] = {k: metrics[k] for k in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A",
                                                  "stress_mae_meV_per_A3")}
        arms[name] = record
        print(f"{name}: {record['cpu_minutes']:.1f} CPU min; test MAE " +
              ", ".join(f"{k} {v:.2f}" for k, v in record["test"].items()), flush=True)
    epochs = arms["pretrain"]["stages"][0].get("epochs", "EPOCHS")
    commands = [f"python {HERE.relative_to(ROOT)}/teacher_labels.py {data_dir} --out-dir out/pretraining"]
    commands += [f"OMP_NUM_THREADS=1 python {HERE.relative_to(ROOT)}/pilot.py arm {name} --epochs {epochs} &"
                 for name in ARMS] + [command]
    write_json(results, {"what": "pilot (one seed, one run per arm): pre-training on SevenNet-0 labels + fine-tuning "
                                 "on GPAW labels against training on GPAW labels from scratch, equal epochs "
                                 "(about equal process CPU time), equiformer_v3-sige recipe at full size, v1 "
                                 "split, the two arms side by side at one thread each",
                         "test_split": "sige-pbe-test.xyz (v1, 100 structures), float64, best (EMA) weights",
                         "commands": commands, "arms": arms})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("arm", "report"))
    parser.add_argument("arm", nargs="?", choices=tuple(ARMS), help="with 'arm': which one")
    parser.add_argument("--epochs", type=int, default=10, help="epochs per pre-training/fine-tuning stage")
    parser.add_argument("--data-dir", type=Path, default=Path("examples/datasets/sige-pbe/work"))
    parser.add_argument("--teacher-dir", type=Path, default=Path("out/pretraining"),
                        help="teacher_labels.py's --out-dir")
    parser.add_argument("--out", type=Path, default=Path("out/pretraining/pilot"))
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/pretraining-pilot-sige.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.what == "arm":
        if args.arm is None:
            parser.error("arm needs pretrain or scratch")
        run_arm(args.arm, args.epochs, args.data_dir, args.teacher_dir, args.out)
    else:
        report(args.out, args.data_dir, args.results, " ".join(["python"] + sys.argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
