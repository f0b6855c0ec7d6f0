#!/usr/bin/env bash
# Where the GEMM's time goes, by leaving one side of its pipeline out: the
# probe build of the GEMM harness runs each of its kernels whole, with its
# loads alone (no wgmma) and with its MMA alone (no TMA), alternated in the
# same rounds (`gemm_vs_cutlass_sides ROUNDS sides`), one launch after an idle
# GPU and back to back; the plain build's `many` beside it (the probe build's
# whole kernels should time as the plain ones), and cuBLAS (torch) on the
# same shapes timed the same two ways. Binaries from
#   bench/gemm_vs_cutlass.sh;  PROBE_SUFFIX=_sides bench/gemm_vs_cutlass.sh -DCUSYNC_SM90_PROBE_SIDES
# (sm_90a, static runtime: built anywhere, run on any H100/H200).
#   [MODES="1 0"] [CUBLAS=1] [PLAIN=1] scripts/pipeline_sides.sh OUTDIR [ROUNDS]
# MODES: the timing modes, 1 back to back, 0 a launch after idle; CUBLAS=0 or
# PLAIN=0 leave out cuBLAS's rows or the plain build's run.
set -uo pipefail
OUT=${1:?usage: scripts/pipeline_sides.sh OUTDIR [ROUNDS]}
ROUNDS=${2:-3}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
P=build/probe
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
smi=$!
run() { local log=$1; shift; echo "-- $* (HARNESS_BACK_TO_BACK=${HARNESS_BACK_TO_BACK:-0})" >> "$OUT/$log";
        timeout 200 "$@" >> "$OUT/$log" 2>&1; echo "$* b2b=${HARNESS_BACK_TO_BACK:-0} -> rc $?"; }
for b2b in ${MODES:-1 0}; do
  export HARNESS_BACK_TO_BACK=$b2b
  run sides.log $P/gemm_vs_cutlass_sides "$ROUNDS" sides
  if [[ ${CUBLAS:-1} == 1 ]]; then
    run sides.log python3 bench/cublas_gemms.py "$ROUNDS" few
    run sides.log python3 bench/cublas_gemms.py "$ROUNDS" many
  fi
done
[[ ${PLAIN:-1} == 1 ]] && HARNESS_BACK_TO_BACK=1 run plain.log $P/gemm_vs_cutlass "$ROUNDS"
kill $smi
python3 bench/pipeline_sides.py "$OUT" | tee "$OUT/table.txt"
