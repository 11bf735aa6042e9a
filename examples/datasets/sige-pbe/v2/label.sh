#!/usr/bin/env bash
# Label the v2 tranches (plan.py) one after another with GPAW on the v2 rule, into one results folder;
# each finished tranche is written as labelled/tranche-NN.xyz. Resumable: a rerun skips what is labelled.
#
#   NICE=19 bash examples/datasets/sige-pbe/v2/label.sh        # in the background, beside other work
#   RANKS=1 SHARDS=2 SHARD=0 bash .../label.sh & RANKS=1 SHARDS=2 SHARD=1 bash .../label.sh &
#                                                               # two one-rank processes, one per core
#
# Two one-rank shards label as fast as one two-rank process (docs/data.md, "Cost") and each goes on alone
# if the other stops; each takes its share of every tranche, and the shard that completes a tranche
# writes labelled/tranche-NN.xyz.
#
# Needs the package's Python with GPAW (`pip install '.[dft]'`, docs/data.md) as `python` and `gpaw`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
ranks=${RANKS:-2}
# OpenMPI pins a lone rank to core 0: two one-rank jobs side by side would share that core
bind=(); [ "$ranks" = 1 ] && bind=(--bind-to none)
shard=(); [ -n "${SHARDS:-}" ] && shard=(--shards "$SHARDS" --shard-index "${SHARD:?SHARD (0 to SHARDS-1) with SHARDS}")
mkdir -p "$here/labelled"
for tranche in "$here"/tranche-*.xyz; do
    name=$(basename "$tranche")
    [ -f "$here/labelled/$name" ] && continue
    echo "== $(date +%H:%M:%S) $name"
    nice -n "${NICE:-0}" mpiexec "${bind[@]}" -n "$ranks" gpaw python -m mlip data label "$tranche" --calculator gpaw \
        --setting kpoint_density_per_inv_A=8.0 --out-dir "$here/run" -o "$here/labelled/$name" "${shard[@]}" \
        --no-progress
done
