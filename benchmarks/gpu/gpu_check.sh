#!/usr/bin/env bash
# The one prepared GPU check (issues 6, 39 and 56): at most 9 minutes of wall time (the stages' limits
# add up to 530 s), so a 15-minute device lease leaves room to start the machine.
#
#   bash benchmarks/gpu/gpu_check.sh               # on the GPU machine; everything under $OUT (or ./gpu_out)
#   bash benchmarks/gpu/gpu_check.sh --cpu-smoke   # checks every stage on a CPU with tiny sizes (~2 minutes)
#
# Stages (each prints one line and writes JSON under $OUT; its full output goes to $OUT/<stage>.log):
#   env        torch, CUDA, CuPy, whether mlip's kernels load (gpu_env.txt)
#   tests      the GPU tests (kernels, neighbour lists on CUDA)                       80 s hard
#   compile    benchmarks/gpu/gpu_compile_probe.py: Platonic at 100k atoms, eager and compiled
#              (MLIPCalculator(compile=True), dynamic shapes), the network on a fixed graph and the full
#              calculator step (target 1e6 atom·steps/s); first, as compiling takes the longest   220 s hard
#   benchmark  benchmarks/gpu/gpu_benchmark.py: neighbour lists (100k atoms, the 512 × 64-atom batch,
#              target < 1 ms), the EquiformerV3 layer with and without the eSCN kernels (target
#              >= 1.5×), calculator steps                                   90 s of measurements, 120 s hard
#   relax      benchmarks/gpu/gpu_batched_relax.py: batched relaxation through torch-sim (target 1e4
#              structures per minute), or "not installed" without mlip.integrations.torchsim    50 s hard
#   train      benchmarks/speed/training_step.py on the GPU: the Si-Ge recipes' training step (eager;
#              compiling takes minutes), on the Si-Ge set's committed card sample (issue 56, item 6)  60 s hard
#   summary    gpu_summary.json: the stage lines and the targets
#
# Needs only the repository and what the GPU machine already has (torch with CUDA, cupy-cuda12x/13x,
# ase, safetensors, optionally vesin): it installs nothing. When mlip is not installed, the checkout is
# made importable by benchmarks/gpu/gpu_bootstrap.py. Python is $PYTHON (default python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR="${OUT:-./gpu_out}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
SMOKE=0
if [ "${1:-}" = "--cpu-smoke" ]; then SMOKE=1; fi
start=$(date +%s)

stage() {  # stage NAME SECONDS COMMAND...: run with a hard limit, log to $OUT/NAME.log, print one line
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s)
    timeout "$limit" "$@" > "$OUT_DIR/$name.log" 2>&1
    local rc=$?
    local took=$(( $(date +%s) - t0 ))
    local summary
    summary=$("$PY" benchmarks/gpu/gpu_summary.py "$name" "$OUT_DIR" 2>&1 | tail -1)
    [ $rc -eq 124 ] && summary="TIMED OUT after $limit s; $summary"
    echo "[$name] rc=$rc ${took}s: $summary"
}

"$PY" - > "$OUT_DIR/gpu_env.txt" 2>&1 <<'PY'
import sys; sys.path.insert(0, "benchmarks/gpu")
import gpu_bootstrap, torch, mlip.kernels as mk
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "python", sys.version.split()[0])
try:
    import cupy; print("cupy", cupy.__version__, "cuda available", cupy.cuda.is_available())
except ImportError as e:
    print("cupy missing:", e)
print("mlip kernels available:", mk.cuda_kernels_available())
PY
echo "[env] $(tr '\n' ' ' < "$OUT_DIR/gpu_env.txt")"

if [ $SMOKE = 1 ]; then
    DEV=(--device cpu); BENCH=(--tiny --budget 20); COMPILE=(--atoms 64 --no-compile --budget 30)
    RELAX=(--structures 4 --steps 5 --seconds 10)
    TRAIN=(--device cpu --threads 2 --steps 1 --warmup 1 --rounds 1)
else
    DEV=(--device cuda); BENCH=(--budget 90); COMPILE=(--atoms 100000 --budget 60)
    RELAX=(--structures 2000 --seconds 30)
    TRAIN=(--device cuda --steps 5 --warmup 3 --rounds 2)   # eager: compiling takes minutes
fi

stage tests 80 "$PY" - "$OUT_DIR" <<'PY'
import importlib.util, json, sys, time
sys.path.insert(0, "benchmarks/gpu")
import gpu_bootstrap, pytest
out = sys.argv[1]
t = time.time()
rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "-k", "gpu or cuda", "tests/kernels/test_kernels.py",
                  "tests/neighbors/test_neighbors.py::test_cuda_matches_cpu",
                  f"--junitxml={out}/gpu_tests.xml"]
                 + (["--timeout=60"] if importlib.util.find_spec("pytest_timeout") else []))
json.dump({"pytest_exit_code": int(rc), "seconds": time.time() - t}, open(f"{out}/gpu_tests.json", "w"))
PY

stage compile 220 "$PY" benchmarks/gpu/gpu_compile_probe.py "${DEV[@]}" "${COMPILE[@]}" \
    --out "$OUT_DIR/compile_probe.json"
stage benchmark 120 "$PY" benchmarks/gpu/gpu_benchmark.py "${DEV[@]}" "${BENCH[@]}" \
    --out "$OUT_DIR/gpu_check.json" --tests "$OUT_DIR/gpu_tests.json"
stage relax 50 "$PY" benchmarks/gpu/gpu_batched_relax.py "${DEV[@]}" "${RELAX[@]}" \
    --out "$OUT_DIR/batched_relax.json"
stage train 60 "$PY" -c 'import runpy, sys; sys.path.insert(0, "benchmarks/gpu"); import gpu_bootstrap
sys.argv = ["training_step.py", *sys.argv[1:]]; runpy.run_path("benchmarks/speed/training_step.py", run_name="__main__")' \
    --train examples/datasets/sige-pbe/card-sample.xyz --profile-steps 0 "${TRAIN[@]}" \
    --out "$OUT_DIR/training_step.json"

"$PY" benchmarks/gpu/gpu_summary.py all "$OUT_DIR" > "$OUT_DIR/summary.log" 2>&1
echo "[summary] $(tr '\n' ' ' < "$OUT_DIR/summary.log" | tr -s ' ')"
echo "gpu_check.sh: total $(( $(date +%s) - start )) s, results in $OUT_DIR"
