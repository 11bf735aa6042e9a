#!/usr/bin/env bash
# Is the Si-Ge energy error the model's size? (../README.md, "Is it the model's size?"). Each arm is
# base.yaml with another width or depth, trained from scratch for its fixed epochs on the v2 set's
# periodic training structures, then scored (last weights, float64) on that training file itself (how
# well it fits what it saw) and on the periodic test structures. Two arms at a time, one thread each:
#
#   python examples/datasets/sige-pbe/v2/assemble.py
#   ARMS="c48-l2 c96-l2" bash examples/recipes/equiformer_v3-sige/v2/capacity/capacity.sh
#   ARMS="c48-l3" bash examples/recipes/equiformer_v3-sige/v2/capacity/capacity.sh
#   JSON=benchmarks/results/capacity-pilot-sige-v2-2026-12-07.json bash .../capacity.sh   # the record
#
# A finished arm is not trained again; a stopped one continues (mlip train --session-minutes).
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
here=examples/recipes/equiformer_v3-sige/v2/capacity
work=examples/datasets/sige-pbe/work/v2/capacity
v2=examples/datasets/sige-pbe/work/v2/sige-pbe-v2
read -r -a arms <<< "${ARMS:-}"
mkdir -p "$work"

python - "$v2" "$work" <<'PY'
import sys
from pathlib import Path
from ase.io import read, write
v2, work = sys.argv[1], Path(sys.argv[2])
for part in ("train", "valid", "test"):
    out = work / f"{part}-periodic.xyz"
    if not out.exists():
        frames = read(f"{v2}-{part}.xyz", ":")
        write(out, [a for a in frames if a.pbc.all()], format="extxyz")
        print(f"{out}: {sum(a.pbc.all() for a in frames)} periodic structures")
    if part == "train" and not (work / "train-input.xyz").exists():  # + the isolated atoms, the references
        atoms = [a for a in frames if a.pbc.all() or a.info.get("config_type") == "isolated_atom"]
        write(work / "train-input.xyz", atoms, format="extxyz")
PY

declare -A width=([c48-l2]=48 [c96-l2]=96 [c48-l3]=48)
declare -A depth=([c48-l2]=2 [c96-l2]=2 [c48-l3]=3)
run_arm() {
    local name=$1 run="$work/$1"
    [ -n "${width[$name]:-}" ] || { echo "unknown arm '$name' (c48-l2, c96-l2, c48-l3)" >&2; exit 2; }
    python - "$here/base.yaml" "$work/$name.yaml" "${width[$name]}" "${depth[$name]}" "$run" <<'PY'
import sys, yaml
base, out, channels, layers, run = sys.argv[1:]
cfg = yaml.safe_load(open(base))
cfg["model"].update(channels=int(channels), num_layers=int(layers))
cfg["out_dir"] = run
yaml.safe_dump(cfg, open(out, "w"), sort_keys=False)
PY
    if ! python -c "import json,sys,yaml; h=json.load(open('$run/metrics.json'))
sys.exit(0 if len(h) >= yaml.safe_load(open('$here/base.yaml'))['epochs'] else 1)" 2>/dev/null; then
        OMP_NUM_THREADS=1 nice mlip train "$work/$name.yaml" --session-minutes 170 --no-progress \
            > "$work/$name.log" 2>&1
    fi
    for part in train test; do
        OMP_NUM_THREADS=1 mlip eval "$run/last.safetensors" "$work/$part-periodic.xyz" \
            --out-dir "$run/eval-$part" --overwrite > /dev/null
    done
    echo "$name done"
}
for name in "${arms[@]}"; do run_arm "$name" & done
wait

if [ -n "${JSON:-}" ]; then
    # the shipped model (fine-tuned from v1 on the v2 set with v1's forces replayed) on the same two files
    for part in train test; do
        [ -f "$work/shipped/eval-$part/metrics.json" ] || OMP_NUM_THREADS=1 mlip eval equiformer_v3-sige \
            "$work/$part-periodic.xyz" --out-dir "$work/shipped/eval-$part" --overwrite > /dev/null
    done
    python - "$work" "$JSON" <<'PY'
import json, sys
from pathlib import Path
from mlip.checkpoint import read_header
work, out = Path(sys.argv[1]), Path(sys.argv[2])
keep = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3")
scores = lambda run, part: {k: json.loads((run / f"eval-{part}" / "metrics.json").read_text())[k] for k in keep}
arms = {"shipped equiformer_v3-sige (v2)": {"train_fit": scores(work / "shipped", "train"),
                                            "test_periodic": scores(work / "shipped", "test")}}
for run in sorted(p for p in work.iterdir() if (p / "last.safetensors").is_file()):
    history = json.loads((run / "metrics.json").read_text())
    arms[run.name] = {
        "n_parameters": read_header(str(run / "last.safetensors"))["num_parameters"],
        "epochs": len(history), "minutes": round(history[-1]["minutes"], 2),
        "train_fit": scores(run, "train"), "test_periodic": scores(run, "test"),
        "valid_last_epoch": {k: history[-1].get(f"valid_{k}") for k in keep}}
n = {part: sum(1 for line in open(work / f"{part}-periodic.xyz") if "Lattice=" in line) for part in ("train", "test")}
record = {"what": "EquiformerV3 from scratch on the v2 set's periodic training structures for fixed epochs, "
                  "by width and depth; last weights (float64) scored on that training file (train_fit) and on "
                  "the periodic test structures, beside the shipped v2 model on the same files",
          "n_train_periodic": n["train"], "n_test_periodic": n["test"], "threads": 1,
          "command": "ARMS=... bash examples/recipes/equiformer_v3-sige/v2/capacity/capacity.sh",
          "config": "examples/recipes/equiformer_v3-sige/v2/capacity/base.yaml", "arms": arms}
out.write_text(json.dumps(record, indent=1) + "\n")
print(json.dumps(arms, indent=1))
PY
fi
