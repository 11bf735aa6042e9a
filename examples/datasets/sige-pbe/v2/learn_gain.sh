#!/usr/bin/env bash
# What the Si–Ge active-learning loop (learn.sh) gained on the crystal properties, κ above all (issue 57,
# item 4): the committee's first member before the loop (iteration 0) and after its last trained
# iteration, against GPAW at converged k-points (the cache of ../dft-validation, --cache-only: no DFT is
# run), in one report. The held-out errors of every iteration are in learn/run/iter-*/metrics.json.
#
#   bash examples/datasets/sige-pbe/v2/learn_gain.sh [OUT]     # default examples/datasets/sige-pbe/work/v2/learn-gain
#
# Works in OUT (ignored by git: the models' copies, the cache, phono3py's folders) and keeps its report,
# dft_validation.json (methods iteration-0 and iteration-K) and the plot, in learn/gain/ (committed);
# minutes of CPU (κ by phono3py for both models). Needs phonopy and phono3py (pip install '.[phonons]').
# A property GPAW has not computed at converged settings yet (the cache of ../dft-validation) has the
# models' values and no difference.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
run=examples/datasets/sige-pbe/v2/learn/run
out=${1:-examples/datasets/sige-pbe/work/v2/learn-gain}
last=""
for folder in "$run"/iter-*; do
    [ -f "$folder/member-0.safetensors" ] && last=$folder
done
if [ -z "$last" ] || [ "$last" = "$run/iter-000" ]; then
    echo "learn_gain.sh: no iteration after 0 has trained members in $run yet" >&2
    exit 2
fi
k=$((10#${last##*iter-}))
mkdir -p "$out/models"
cp "$run/iter-000/member-0.safetensors" "$out/models/iteration-0.safetensors"
cp "$last/member-0.safetensors" "$out/models/iteration-$k.safetensors"
rm -rf "$out/cache"
cp -r examples/datasets/sige-pbe/dft-validation/cache "$out/"
python benchmarks/accuracy/dft_validation.py --out "$out" --converged --cache-only gpaw \
    --model "$out/models/iteration-0.safetensors" --model "$out/models/iteration-$k.safetensors" \
    --elements Si Ge --properties lattice phases elastic phonons vacancy surface kappa --no-progress
record=examples/datasets/sige-pbe/v2/learn/gain
mkdir -p "$record"
cp "$out/dft_validation.json" "$record/dft_validation.json"
[ -f "$out/dft_validation.png" ] && cp "$out/dft_validation.png" "$record/dft_validation.png"
echo "learn_gain.sh: the report is in $record"
