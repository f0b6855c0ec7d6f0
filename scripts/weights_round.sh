#!/usr/bin/env bash
# One device call: build the package (scripts/gpu_check.sh, build only), then
# bench/weights_l2.py (the GEMM with its weights from DRAM against from L2) on
# the few-row shapes, then the GPU tests in what is left of the call.
#   CUSYNC_COMMIT=<hash> scripts/weights_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/weights_round.sh OUTDIR}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
SKIP_TESTS=1 SKIP_BENCH=1 bash scripts/gpu_check.sh "$OUT" || exit 1
[[ -d /tmp/cusync-wheels ]] && export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
echo "== weights_l2 ($(date +%H:%M:%S))"
timeout -k 10 "${WEIGHTS_TIMEOUT:-150}" python3 bench/weights_l2.py --commit "${CUSYNC_COMMIT:-unknown}" \
  --shapes 256x8192x2816 512x8192x2816 256x4096x4096 256x5632x8192 --out "$OUT/weights_l2.json" \
  > "$OUT/weights_l2.log" 2>&1
echo "weights_l2: rc $?"; cat "$OUT/weights_l2.log"
echo "== GPU tests ($(date +%H:%M:%S))"
timeout -k 10 "${TEST_TIMEOUT:-300}" python3 -P -m pytest -p no:cacheprovider -q -rfEs --timeout 120 \
  ${GPU_TESTS:--m gpu tests} > "$OUT/pytest.log" 2>&1
echo "pytest: rc $?"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20; tail -1 "$OUT/pytest.log"
echo "== done ($(date +%H:%M:%S))"
