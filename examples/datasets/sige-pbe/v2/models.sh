#!/usr/bin/env bash
# The v2 Si–Ge models (issue 55) from the v2 labels, in order, each step skipped when its output exists
# (a rerun after a stop goes on where it stopped; the fine-tunings advance one session at a time):
#
#   bash examples/datasets/sige-pbe/v2/models.sh                       # all steps
#   STEPS="data finetune" SESSION=150 bash examples/datasets/sige-pbe/v2/models.sh
#   STEPS=finetune MODELS=platonic-sige bash examples/datasets/sige-pbe/v2/models.sh   # one model
#
# Steps (STEPS, default all):
#   data      the v2 files (assemble.py: work/v2/sige-pbe-v2{,-train,-valid,-test}.xyz) and the v2 data
#             card (kept here: sige-pbe-v2.card.{json,md})
#   finetune  equiformer_v3-sige and platonic-sige fine-tuned from the shipped v1 models on the v2 labels
#             (examples/recipes/<model>/v2/finetune.yaml, plateau-ended), SESSION minutes (default 150) per
#             call on THREADS threads (default 1); the run folders are committed and continue anywhere. The
#             step ends a model when its run has stopped (the plateau rule's decay done)
#   mace      MACE trained on the same training file (the -replay one: MACE reads its config_*_weight
#             keys too) for as many minutes as the EquiformerV3 fine-tuning took; errors and MD-step cost
#             of all three, one run
#   validate  both models, SevenNet-0 and CHGNet against GPAW at converged k-points (the cache of
#             ../dft-validation, filled by dft_validation.py --converged under mpiexec), κ(300 K) of all,
#             one run in FOUNDATION_PYTHON (a Python with this package, phonopy, phono3py, sevenn and
#             chgnet; default /work/venvs/teacher/bin/python)
#   cards     the cards' sample (card-sample.xyz, 3 test frames per kind, kept here) and the two model
#             cards (CARDS_OUT, default models/pretrained), with issue 55's targets
#             (examples/recipes/<model>/v2/targets.json) met or missed, the error budget, MACE and the
#             foundation models beside
#
# WORK (default examples/datasets/sige-pbe/work/v2, git-ignored) holds the MACE run and the validation.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
steps=${STEPS:-"data finetune mace validate cards"}
work=${WORK:-examples/datasets/sige-pbe/work/v2}  # relative to the repository (the cards name it)
session=${SESSION:-150}
threads=${THREADS:-1}
mace_python=${MACE_PYTHON:-/work/venvs/mace/bin/python}
foundation_python=${FOUNDATION_PYTHON:-/work/venvs/teacher/bin/python}
cards_out=${CARDS_OUT:-models/pretrained}
cd "$root"
mkdir -p "$work"

want() { [[ " $steps " == *" $1 "* ]]; }
say() { echo "== $(date +%H:%M:%S) $*"; }
# MODELS: one of them to run its steps alone (e.g. the two fine-tunings side by side, one per core)
read -r -a models <<< "${MODELS:-equiformer_v3-sige platonic-sige}"
for model in "${models[@]}"; do
    case $model in equiformer_v3-sige|platonic-sige) ;;
        *) echo "MODELS: unknown model '$model' (equiformer_v3-sige, platonic-sige)" >&2; exit 2 ;; esac
done
# the shipped form (as v1): the Platonic Transformer averaged over its 5 cosets in the icosahedral group
declare -A ship_options=([equiformer_v3-sige]="" [platonic-sige]="--average-over icosahedral")
# the weights shipped: the run's last, decayed ones where the periodic validation frames' energy and force
# errors are both lower there than at the best epoch by the validation loss (which six compressed dimers and
# trimers carry; examples/recipes/equiformer_v3-sige/v2/README.md, "Energies are under-fitted"), else the
# best epoch's: which_weights.py, on the validation file only
weights_of() { python "$here/which_weights.py" "examples/recipes/$1/v2/finetune-run"; }
v2=examples/datasets/sige-pbe/work/v2/sige-pbe-v2
card_sample=examples/datasets/sige-pbe/v2/card-sample.xyz
properties=(lattice phases elastic phonons vacancy surface)
mace_loss="--loss huber --huber_delta 0.01"  # the loss of our recipes (../models.sh)

stopped() {  # whether the run folder's last epoch says the plateau rule ended it
    python - "$1" <<'PY'
import json, sys
from pathlib import Path
path = Path(sys.argv[1]) / "metrics.json"
history = json.loads(path.read_text()) if path.is_file() else []
sys.exit(0 if history and history[-1].get("stopped") else 1)
PY
}

if want data; then
    say "data: the v2 files"
    python "$here/assemble.py"
    python -m mlip data card "$v2.xyz" -o "$here/sige-pbe-v2.card.json" \
        --markdown "$here/sige-pbe-v2.card.md" --overwrite
fi

if want finetune; then
    for model in "${models[@]}"; do
        recipe=examples/recipes/$model/v2/finetune.yaml
        run=examples/recipes/$model/v2/finetune-run
        if stopped "$run"; then
            say "finetune: $model has stopped ($run)"
            continue
        fi
        say "finetune: $model, $session min on $threads thread(s)"
        OMP_NUM_THREADS=$threads python -m mlip train "$recipe" --session-minutes "$session" --no-progress
        stopped "$run" || { say "finetune: $model continues next session (rerun this step)"; exit 0; }
    done
fi

shipped() {  # the model's shipped form, for MACE and the validation: $work/models/<model>.safetensors
    local model=$1 target=$work/models/$1.safetensors
    if [ ! -f "$target" ]; then
        mkdir -p "$work/models"
        python - "examples/recipes/$model/v2/finetune-run/$(weights_of "$model").safetensors" "$target" \
            ${ship_options[$model]} <<'PY'
import sys
from mlip.checkpoint import save_with_hyperparameters
source, target, *options = sys.argv[1:]  # --average-over icosahedral
save_with_hyperparameters(source, target, **{flag.lstrip("-").replace("-", "_"): value
                                             for flag, value in zip(options[::2], options[1::2])})
PY
    fi
    echo "$target"
}

if want mace && [ ! -f "$work/mace/mace_baseline.json" ]; then
    minutes=$(python -c "import json,sys; print(json.load(open(sys.argv[1]))[-1]['minutes'])" \
        examples/recipes/equiformer_v3-sige/v2/finetune-run/metrics.json)
    say "mace: MACE $minutes min on the v2 training file, then errors and MD-step cost of all three"
    python benchmarks/accuracy/mace_baseline.py --train "$v2-train-replay.xyz" --test "$v2-test.xyz" \
        --minutes "$minutes" --mace-python "$mace_python" --md-cells si-ge --threads 2 --out "$work/mace" \
        --mace-extra="$mace_loss" --ours "$(shipped equiformer_v3-sige)" --ours "$(shipped platonic-sige)"
fi

if want validate && [ ! -f "$work/validation/dft_validation.json" ]; then
    say "validate: both models, SevenNet-0 and CHGNet against GPAW at converged k-points, and κ(300 K)"
    mkdir -p "$work/validation"
    cp -r examples/datasets/sige-pbe/dft-validation/cache "$work/validation/"
    "$foundation_python" benchmarks/accuracy/dft_validation.py --out "$work/validation" --converged \
        --cache-only gpaw --model "$(shipped equiformer_v3-sige)" --model "$(shipped platonic-sige)" \
        --model sevenn.calculator:SevenNetCalculator --model chgnet.model.dynamics:CHGNetCalculator \
        --elements Si Ge --properties "${properties[@]}" kappa --no-progress
fi

if want cards; then
    # kept in the repository once made: 3 test frames per kind of the test file the cards are made on
    # (made here, not with the data: the test file grows until the labelling ends)
    if [ ! -f "$card_sample" ]; then
        python "$here/../card_sample.py" "$v2-test.xyz" "$card_sample"
    fi
    for model in "${models[@]}"; do
        say "cards: $model"
        python benchmarks/model_card.py "examples/recipes/$model/v2/finetune-run" --name "$model" \
            --out "$cards_out" --test "$v2-test.xyz" \
            --test-command "python examples/datasets/sige-pbe/v2/assemble.py" \
            --test-description "the v2 test part: v1's test structures with their converged labels" \
            --train-data-command "python examples/datasets/sige-pbe/v2/assemble.py" \
            --train-command "OMP_NUM_THREADS=$threads mlip train examples/recipes/$model/v2/finetune.yaml \
--session-minutes $session (from the first version, v1, init_from)" \
            --train-threads "$threads thread(s) of a 2-core machine" \
            --reference "GPAW PBE (v2: converged k-points)" \
            --domain "$(cat "examples/recipes/$model/v2/domain.txt")" \
            --summary "$(cat "examples/recipes/$model/v2/summary.txt")" \
            --targets-file "examples/recipes/$model/v2/targets.json" --speed-cells si-ge \
            ${ship_options[$model]} --weights "$(weights_of "$model")" \
            --card-sample "$card_sample" \
            --dft-validation "$work/validation/dft_validation.json" --dft-validation-method "$model" \
            --dft-validation-beside SevenNetCalculator CHGNetCalculator \
            --dft-validation-command "STEPS=validate bash examples/datasets/sige-pbe/v2/models.sh" \
            --mace-baseline "$work/mace/mace_baseline.json" --mace-row "$work/models/$model.safetensors" \
            --mace-baseline-command "STEPS=mace bash examples/datasets/sige-pbe/v2/models.sh" \
            --label-noise benchmarks/results/sige-v1-label-noise-2026-12-06.json \
            --label-floor benchmarks/results/kpoint-convergence-sige.json
    done
fi
say "done: $steps"
