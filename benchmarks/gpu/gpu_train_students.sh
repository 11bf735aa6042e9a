#!/usr/bin/env bash
# One device run for issue 38: the CHGNet students trained side by side on the GPU, each for MINUTES
# (examples/recipes/train_on_budget.py: the epochs that fit), their folders tarred into $OUT.
#
#   bash benchmarks/gpu/gpu_train_students.sh DATA_DIR MINUTES [MODEL ...]   # MODEL: equiformer_v3, platonic
#
# DATA_DIR holds chem-chgnet-train.xyz and chem-chgnet-valid.xyz (or .gz; examples/recipes/
# equiformer_v3-chgnet/README.md makes them), inside the working tree so that it travels with it.
# The device machine has torch with CUDA but not ase or vesin: their wheels are installed from .whl/
# (made beforehand here with `pip download --no-deps --only-binary=:all: --python-version 3.12
# --implementation cp --platform manylinux_2_17_x86_64 -d .whl ase==3.29.0 vesin==0.6.2`), and the
# package itself into /tmp/site, outside the checkout (whose mlip/ would shadow the installed one).
# DEVICE=cpu runs the same on a CPU (a smoke run with a tiny MINUTES). Default models: equiformer_v3.
set -uo pipefail
cd "$(dirname "$0")/../.."
DATA_DIR=$(realpath "${1:?usage: gpu_train_students.sh DATA_DIR MINUTES [MODEL ...]}")
MINUTES=${2:?usage: gpu_train_students.sh DATA_DIR MINUTES [MODEL ...]}
shift 2
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && MODELS=(equiformer_v3)
OUT_DIR="${OUT:-./gpu_out}"
mkdir -p "$OUT_DIR"
OUT_DIR=$(realpath "$OUT_DIR")
T0=$(date +%s)
SITE=${SITE:-/tmp/site}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target "$SITE" . \
  > "$OUT_DIR/install.log" 2>&1 || { echo "installing the package failed: $OUT_DIR/install.log"; exit 1; }
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
echo "installed in $(( $(date +%s) - T0 )) s"
REPO=$PWD
WORK=$(mktemp -d)
cd "$WORK"
python3 -c "import torch, mlip, ase, vesin; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
LIMIT=$(python3 -c "print(int(60 * $MINUTES * 1.3 + 120))")  # calibration and the final checkpoint
for m in "${MODELS[@]}"; do
  timeout "$LIMIT" python3 "$REPO/examples/recipes/train_on_budget.py" "$REPO/examples/recipes/$m-chgnet/train.yaml" \
    --minutes "$MINUTES" ${DEVICE:+--device $DEVICE} --data-dir "$DATA_DIR" --out-dir "$WORK/$m-chgnet" \
    > "$OUT_DIR/$m.log" 2>&1 &
done
wait
echo "training done at $(( $(date +%s) - T0 )) s"
for m in "${MODELS[@]}"; do
  echo "$m: $(grep -E '^(calibration|trained)' "$OUT_DIR/$m.log" | tr '\n' ' ')"
  [ -d "$m-chgnet" ] && tar cf "$OUT_DIR/$m-chgnet.tar" "$m-chgnet"
done
cd "$REPO" && rm -rf "$WORK"
ls "$OUT_DIR"
