#!/usr/bin/env bash
# One device call for the consumer-weights prefetch: build the package
# (scripts/gpu_check.sh, build only); bench/weights_l2.py (the GEMM with its
# weights from DRAM against from L2); the GPU tests named by GPU_TESTS; then
# bench/mlp.py with l2w=1 beside the same plans without it, over several
# weight sets (so no call finds its weights in L2 from the call before).
#   CUSYNC_COMMIT=<hash> scripts/weights_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/weights_round.sh OUTDIR}
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
SKIP_TESTS=1 SKIP_BENCH=1 bash scripts/gpu_check.sh "$OUT" || exit 1
[[ -d /tmp/cusync-wheels ]] && export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
echo "== weights_l2 ($(date +%H:%M:%S))"
timeout -k 10 "${WEIGHTS_TIMEOUT:-120}" python3 bench/weights_l2.py --commit "${CUSYNC_COMMIT:-unknown}" \
  --shapes 256x8192x2816 512x8192x2816 256x4096x4096 256x12288x6144 --out "$OUT/weights_l2.json" \
  > "$OUT/weights_l2.log" 2>&1
echo "weights_l2: rc $?"; cat "$OUT/weights_l2.log"
echo "== GPU tests ($(date +%H:%M:%S))"
timeout -k 10 "${TEST_TIMEOUT:-150}" python3 -P -m pytest -p no:cacheprovider -q -rfEs --timeout 120 \
  tests/test_gpu_mlp.py -k "${GPU_TESTS:-prefetched_consumer or optimizations_many_waves}" > "$OUT/pytest.log" 2>&1
echo "pytest: rc $?"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20; tail -1 "$OUT/pytest.log"
echo "== MLP, l2w=1 ($(date +%H:%M:%S))"
timeout -k 10 "${BENCH_TIMEOUT:-240}" python3 bench/mlp.py --out-dir "$OUT" --commit "${CUSYNC_COMMIT:-unknown}" \
  --models llama gpt3 --tokens ${TOKENS:-256 512 1024} --dtype float16 --timing device --rounds 10 \
  --weight-sets 3 --variants l2w=1 \
  --skip TileSync-streams "StridedSync(2)-streams" "StridedSync(2)-fused" serial-sk TileSync-fused@l2w=1 \
  > "$OUT/mlp.log" 2>&1
echo "mlp: rc $?"; grep -vE "^\s*$" "$OUT/mlp.log" | tail -60
echo "== done ($(date +%H:%M:%S))"
