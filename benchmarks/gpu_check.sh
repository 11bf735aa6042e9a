#!/usr/bin/env bash
# One prepared GPU check (issue 6): the kernel tests, then the GPU benchmark, in < 8 minutes.
#
#   bash benchmarks/gpu_check.sh            # writes $OUT/gpu_check.json (or ./gpu_check.json)
#
# Needs only the repository and what the GPU machine already has (torch with CUDA, cupy-cuda12x/13x,
# ase, safetensors, optionally vesin; ase and vesin can be carried as wheels): it installs nothing. When mlip is not installed, the checkout is made
# importable by benchmarks/gpu_bootstrap.py. Time limits: GPU tests 120 s (60 s per test), benchmark
# budget 160 s of measurements (the script stops starting new ones when its budget runs out) and
# 220 s hard. The CPU-only kernel tests (nvcc compile checks, host-built kernels) run in CI and are
# not repeated here. Python is $PYTHON (default python3, the interpreter that holds CUDA torch).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-.}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
start=$(date +%s)

"$PY" - <<'PY' 2>&1 | tee "$OUT_DIR/gpu_env.txt"
import sys; sys.path.insert(0, "benchmarks")
import gpu_bootstrap, torch, mlip.kernels as mk
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
try:
    import cupy; print("cupy", cupy.__version__, "cuda available", cupy.cuda.is_available())
except ImportError as e:
    print("cupy missing:", e)
print("mlip kernels available:", mk.cuda_kernels_available())
PY

timeout 120 "$PY" - "$OUT_DIR" <<'PY' 2>&1 | tee "$OUT_DIR/gpu_tests.txt"
import importlib.util, json, sys, time
sys.path.insert(0, "benchmarks")
import gpu_bootstrap, pytest
out = sys.argv[1]
t = time.time()
rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "-k", "gpu or cuda", "tests/kernels/test_kernels.py",
                  "tests/neighbors/test_neighbors.py::test_cuda_matches_cpu", f"--junitxml={out}/gpu_tests.xml"]
                 + (["--timeout=60"] if importlib.util.find_spec("pytest_timeout") else []))
json.dump({"pytest_exit_code": int(rc), "seconds": time.time() - t}, open(f"{out}/gpu_tests.json", "w"))
PY

timeout 220 "$PY" benchmarks/gpu_benchmark.py --budget 160 --out "$OUT_DIR/gpu_check.json" \
    --tests "$OUT_DIR/gpu_tests.json"
rc=$?
echo "gpu_check.sh: benchmark exit code $rc, total $(( $(date +%s) - start )) s"
exit $rc
