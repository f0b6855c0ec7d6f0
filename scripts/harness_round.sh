#!/usr/bin/env bash
# The harnesses' experiments on a GPU machine, from binaries built beforehand
# (bench/gemm_vs_cutlass.sh; they run anywhere with an H100/H200 as they are):
#   build/probe/conv_vs_cutlass            the conv's GEMMs, one kernel at a time
#   build/probe/conv_vs_cutlass_phases     phase stamps of ours through im2col and on the matrix
#   build/probe/gemm_vs_cutlass_phases     phase stamps of the MLP's GEMM tiles
# Logs go to OUTDIR.
#   scripts/harness_round.sh OUTDIR
set -uo pipefail
OUT=${1:?usage: scripts/harness_round.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
P=build/probe
run() { local log=$1; shift; if [[ -x $1 ]]; then timeout 120 "$@" >> "$OUT/$log" 2>&1; echo "$* -> rc $?"; else echo "missing $1"; fi; }
echo "== the conv's GEMMs (times)"
run conv_vs_cutlass.log $P/conv_vs_cutlass 10 && cat "$OUT/conv_vs_cutlass.log"
echo "== phases: conv"
for b in conv_vs_cutlass_phases; do
  for layer in "56 64 1" "7 512 1" "56 64 8"; do
    # shellcheck disable=SC2086
    run conv_phases.log $P/$b phases $layer
  done
done
grep -E "^phases|first TMA|first data|mainloop|epilogue|to exit" "$OUT/conv_phases.log"
echo "== phases: GEMM 256x8192x2816"
for b in gemm_vs_cutlass_phases; do
  echo "-- $b" >> "$OUT/gemm_phases.log"
  run gemm_phases.log $P/$b phases 256 8192 2816
done
grep -E "^--|^phases|first TMA|epilogue|entry..exit" "$OUT/gemm_phases.log"
