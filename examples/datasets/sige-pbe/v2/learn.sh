#!/usr/bin/env bash
# The active-learning loop on the real material (issue 57, item 4): a committee of three EquiformerV3
# models of the v2 recipe, each fine-tuned on the v2 labels from the shipped v1 model (TEACHER= another
# checkpoint of that architecture; see below), explores from learn/seeds.xyz (MD at 300, 900 and
# 1,800 K, relaxations, strained and rattled copies), and GPAW labels on the v2 rule (Γ-centred k-point
# density 8 Å⁻¹) the frames it is least sure of, a few per iteration, within the DFT budget of issue 55. Its labels join the v2 set (assemble.py). Resumable at every stage:
# rerun the same command; the folder learn/ is committed as it grows.
#
#   NICE=5 bash examples/datasets/sige-pbe/v2/learn.sh      # BUDGET (labels, default 20), RANKS (GPAW, 2)
#
# Needs: the v2 files (python examples/datasets/sige-pbe/v2/assemble.py), GPAW (docs/data.md), and the
# starting weights. The loop's inputs are frozen at its start: learn/initial.xyz (the v2 training file
# then), learn/heldout.xyz (the v2 test file then) and learn/pretrained.safetensors (the starting weights).
# Why the v1 model and not the v2 pre-training on SevenNet-0's labels: on the 21 periodic structures v2
# had labelled (2026-12-06), against their v2 labels, the v1 model's forces are off by 91 meV/Å and the
# pre-trained model's by 303 (SevenNet-0's own labels by 564, a median of about 230): v1's labels, noisy
# as they are, lie far closer to v2's than the teacher's do. (The v1 model trained on 16 of the 21 with
# their v1 labels, so its number is optimistic; the gap is too large for that to close it.)
# The members' training folders (iter-*/training/) are not committed: a member stopped mid-training on a
# fresh clone trains again from the start of its iteration.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cd "$root"
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
learn=examples/datasets/sige-pbe/v2/learn
teacher=${TEACHER:-models/pretrained/equiformer_v3-sige.safetensors}
mkdir -p "$learn"
for part in train:initial test:heldout; do
    [ -f "$learn/${part#*:}.xyz" ] || cp "examples/datasets/sige-pbe/work/v2/sige-pbe-v2-${part%%:*}.xyz" \
        "$learn/${part#*:}.xyz"
done
[ -f "$learn/pretrained.safetensors" ] || cp "$teacher" "$learn/pretrained.safetensors"
[ -f "$learn/seeds.xyz" ] || python examples/datasets/sige-pbe/v2/learn_seeds.py
resume=()
# OpenMPI pins a lone rank to core 0: two one-rank jobs side by side would share that core
bind=""; [ "${RANKS:-2}" = 1 ] && bind="--bind-to none "
[ -f "$learn/run/learn.json" ] && resume=(--resume)
nice -n "${NICE:-0}" mlip learn "$learn/initial.xyz" --heldout "$learn/heldout.xyz" --seeds "$learn/seeds.xyz" \
    --out-dir "$learn/run" --oracle gpaw --setting kpoint_density_per_inv_A=8.0 \
    --oracle-launcher "mpiexec ${bind}-n ${RANKS:-2} gpaw python" \
    --model examples/recipes/equiformer_v3-sige/v2/committee.yaml \
    --finetune-from "$learn/pretrained.safetensors" \
    --committee 3 --epochs 30 --finetune-epochs 15 --label-budget "${BUDGET:-20}" --per-iteration 5 \
    --temperatures 300 900 1800 --trust-hi 1.0 --threads 1 --no-progress "${resume[@]}"
