#!/usr/bin/env bash
# The harnesses on a GPU machine, from binaries built beforehand by
# scripts/build_probes.sh (they run anywhere with an H100/H200 as they are):
#   build/probe/conv_pair_sync          the fused conv pair under each policy, and serial
#   build/probe/conv_pair_sync_phases   its phase stamps, conv 1's and conv 2's CTAs apart
#   build/probe/conv_vs_cutlass         the conv's GEMMs, one kernel at a time
#   build/probe/conv_vs_cutlass_phases  phase stamps of ours through im2col and on the matrix
#   build/probe/gemm_vs_cutlass_phases  phase stamps of the MLP's GEMM, with the cycles the
#                                       loader and the MMA warpgroups waited over the first tile
#   build/probe/halo_conv_probe         the 3x3 conv with its input loaded once as a halo (check, then times)
#   build/probe/halo_pair_probe[_stamps] the package's halo conv pair outside XLA (back-to-back
#                                       times, a hang watchdog; _stamps: each CTA's phases)
# SUFFIX=_x runs an experiment's conv and GEMM binaries instead, those build_probes.sh built with
# its flags under that suffix.
# A binary that is missing is reported and skipped. Logs go to OUTDIR.
#   [SUFFIX=_x] scripts/harness_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/harness_round.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
P=build/probe
x=${SUFFIX:-}
run() { local log=$1; shift; if [[ -x $1 ]]; then timeout 120 "$@" >> "$OUT/$log" 2>&1; echo "$* -> rc $?"; else echo "missing $1"; fi; }
summary="^phases|first TMA|first data|mainloop|a k-block|A issue span|epilogue|waited"

echo "== the conv harnesses$x"
echo "-- conv_pair_sync$x" >> "$OUT/pair.log"
run pair.log $P/conv_pair_sync$x 10
echo "-- conv_pair_sync_phases$x" >> "$OUT/pair_phases.log"
run pair_phases.log $P/conv_pair_sync_phases$x phases 56 64 1
echo "-- conv_vs_cutlass$x" >> "$OUT/conv.log"
run conv.log $P/conv_vs_cutlass$x 10
echo "-- conv_vs_cutlass_phases$x" >> "$OUT/conv_phases.log"
for layer in "56 64 1" "7 512 1"; do
  # shellcheck disable=SC2086
  run conv_phases.log $P/conv_vs_cutlass_phases$x phases $layer
done
echo "== the halo conv"
run halo.log $P/halo_conv_probe check
run halo.log $P/halo_conv_probe time-all
for b in 1 8 32; do run halo.log $P/halo_pair_probe $b; done
echo "== the MLP's GEMM$x"
echo "-- gemm_vs_cutlass_phases$x" >> "$OUT/gemm_phases.log"
for shape in "4096 6144 12288" "256 6144 12288" "256 12288 6144" "256 8192 2816"; do
  # shellcheck disable=SC2086
  run gemm_phases.log $P/gemm_vs_cutlass_phases$x phases $shape
done
echo "-- gemm_vs_cutlass$x" >> "$OUT/gemm.log"
for shape in "4096 6144 12288" "256 6144 12288"; do
  # shellcheck disable=SC2086
  run gemm.log $P/gemm_vs_cutlass$x 3 $shape
done
# 128x256 tiles in 2x1 clusters (B multicast) at 4096 rows: new, not yet run (the timeout guards a hang).
echo "-- gemm_vs_cutlass$x big-c2" >> "$OUT/gemm.log"
run gemm.log $P/gemm_vs_cutlass$x 3 big-c2
cat "$OUT/pair.log"
grep -E "^--|$summary" "$OUT/pair_phases.log"
grep -E "^--|own_conv|cutlass3_pp" "$OUT/conv.log"
grep -E "^--|$summary" "$OUT/conv_phases.log" "$OUT/gemm_phases.log"
grep -E "^--|own|cutlass" "$OUT/gemm.log"
grep -E "FAIL|HANG|^time|launch" "$OUT/halo.log"
