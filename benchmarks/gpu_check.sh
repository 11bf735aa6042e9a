#!/usr/bin/env bash
# One prepared GPU check (issue 6): the kernel tests, then the GPU benchmark, in < 8 minutes.
#
#   bash benchmarks/gpu_check.sh            # writes $OUT/gpu_check.json (or ./gpu_check.json)
#
# Needs only the repository and what the GPU machine already has (torch with CUDA, cupy-cuda12x/13x,
# optionally nvcc and vesin): it installs nothing. When mlip is not installed, the checkout is made
# importable by benchmarks/gpu_bootstrap.py. Time limits: tests 150 s, benchmark budget 240 s of
# measurements (the script stops starting new ones when its budget runs out) and 300 s hard.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-.}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
start=$(date +%s)

python - <<'PY' 2>&1 | tee "$OUT_DIR/gpu_env.txt"
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

timeout 150 python - "$OUT_DIR" <<'PY' 2>&1 | tee "$OUT_DIR/gpu_tests.txt"
import json, sys, time
sys.path.insert(0, "benchmarks")
import gpu_bootstrap, pytest
out = sys.argv[1]
t = time.time()
rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "tests/test_kernels.py", "tests/test_neighbors.py::test_cuda_matches_cpu",
                  f"--junitxml={out}/gpu_tests.xml"])
json.dump({"pytest_exit_code": int(rc), "seconds": time.time() - t}, open(f"{out}/gpu_tests.json", "w"))
PY

timeout 300 python benchmarks/gpu_benchmark.py --budget 240 --out "$OUT_DIR/gpu_check.json" \
    --tests "$OUT_DIR/gpu_tests.json"
rc=$?
echo "gpu_check.sh: benchmark exit code $rc, total $(( $(date +%s) - start )) s"
exit $rc
