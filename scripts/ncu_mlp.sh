#!/usr/bin/env bash
# Per-kernel cycles of MLP variants under Nsight Compute (bench/profile_mlp.py):
# once at ncu's locked base clocks and once with the clocks left free, so a
# variant's cycles can be told apart from the clock the power cap gives it.
# Run after a build (SKIP_TESTS=1 SKIP_BENCH=1 scripts/gpu_check.sh OUTDIR).
#
#   scripts/ncu_mlp.sh OUTDIR MODEL TOKENS VARIANT...
set -uo pipefail
OUTDIR=${1:?usage: scripts/ncu_mlp.sh OUTDIR MODEL TOKENS VARIANT...}
MODEL=${2:?model}; TOKENS=${3:?tokens}; shift 3
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct
for clocks in base none; do
  name="$OUTDIR/ncu_mlp_${MODEL}_${TOKENS}_${clocks}"
  timeout -k 10 "${NCU_TIMEOUT:-150}" ncu --profile-from-start off --clock-control "$clocks" \
    --metrics "$METRICS" --csv "$PY" bench/profile_mlp.py "$MODEL" "$TOKENS" "$@" > "$name.csv" 2> "$name.err"
  echo "clocks $clocks: rc $? ($name.csv)"
  "$PY" bench/ncu_table.py "$name.csv"
done
