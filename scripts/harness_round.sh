#!/usr/bin/env bash
# The harnesses' experiments on a GPU machine, from binaries built beforehand
# (bench/gemm_vs_cutlass.sh; they run anywhere with an H100/H200 as they are):
#   build/probe/conv_pair_sync[_X]          the fused conv pair under each policy, and serial
#   build/probe/conv_pair_sync_phases[_X]   its phase stamps, conv 1's and conv 2's CTAs apart
#   build/probe/conv_vs_cutlass[_X]         the conv's GEMMs, one kernel at a time
#   build/probe/conv_vs_cutlass_phases[_X]  phase stamps of ours through im2col and on the matrix
# _X: the loader experiments of bench/NOTES_sm90.md (stop 21) compiled in:
#   _shortcut  -DCUSYNC_SM90_WAIT_SHORTCUT=1  (no per-k-block wait once the tile holds every semaphore)
#   _cursor    -DCUSYNC_SM90_CONV_A_CURSOR=1  (conv A's coordinates stepped, not divided, each k-block)
#   _both      both
# A binary that is missing is reported and skipped. Logs go to OUTDIR.
#   scripts/harness_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/harness_round.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
P=build/probe
run() { local log=$1; shift; if [[ -x $1 ]]; then timeout 120 "$@" >> "$OUT/$log" 2>&1; echo "$* -> rc $?"; else echo "missing $1"; fi; }

echo "== the fused conv pair, each policy (times)"
for x in "" _shortcut _cursor _both; do
  echo "-- conv_pair_sync$x" >> "$OUT/pair.log"
  run pair.log $P/conv_pair_sync$x 10
done
cat "$OUT/pair.log"
echo "== the fused conv pair's phases (56x56x64 batch 1)"
for x in "" _both; do
  echo "-- conv_pair_sync_phases$x" >> "$OUT/pair_phases.log"
  run pair_phases.log $P/conv_pair_sync_phases$x phases 56 64 1
done
grep -E "^--|^phases|first TMA|first data|mainloop|a k-block|A issue span|epilogue" "$OUT/pair_phases.log"

echo "== the conv's GEMMs (times)"
for x in "" _cursor; do
  echo "-- conv_vs_cutlass$x" >> "$OUT/conv.log"
  run conv.log $P/conv_vs_cutlass$x 10
done
grep -E "^--|own_conv|cutlass3_pp" "$OUT/conv.log"
echo "== phases: one conv"
for x in "" _cursor; do
  echo "-- conv_vs_cutlass_phases$x" >> "$OUT/conv_phases.log"
  for layer in "56 64 1" "7 512 1"; do
    # shellcheck disable=SC2086
    run conv_phases.log $P/conv_vs_cutlass_phases$x phases $layer
  done
done
grep -E "^--|^phases|first data|mainloop|a k-block|A issue span" "$OUT/conv_phases.log"
