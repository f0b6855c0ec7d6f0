#!/usr/bin/env bash
# One device call: build the package (scripts/gpu_check.sh, build only), then
# bench/weights_l2.py (the GEMM with its weights from DRAM against from L2) on
# the few-row shapes, XLA's dot beside ours.
#   CUSYNC_COMMIT=<hash> scripts/weights_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/weights_round.sh OUTDIR}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
SKIP_TESTS=1 SKIP_BENCH=1 bash scripts/gpu_check.sh "$OUT" || exit 1
[[ -d /tmp/cusync-wheels ]] && export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
echo "== weights_l2 ($(date +%H:%M:%S))"
timeout -k 10 "${WEIGHTS_TIMEOUT:-120}" python3 bench/weights_l2.py --commit "${CUSYNC_COMMIT:-unknown}" \
  --shapes ${SHAPES:-256x8192x2816 512x8192x2816 256x4096x4096 256x12288x6144} --out "$OUT/weights_l2.json" \
  2>&1 | tee "$OUT/weights_l2.log"
echo "== done ($(date +%H:%M:%S))"
