#!/usr/bin/env bash
# Where the GEMM's time goes, by leaving one side of its pipeline out: the
# GEMM harness as built (full), without its wgmmas (_nomma: the loads alone)
# and without its TMA loads (_noload: the MMA alone), each at the MLP's
# shapes, one launch after an idle GPU and back to back; cuBLAS (torch) on
# the same shapes timed the same two ways. Binaries come from
#   bench/gemm_vs_cutlass.sh;  PROBE_SUFFIX=_nomma bench/gemm_vs_cutlass.sh -DCUSYNC_SM90_PROBE_NO_MMA
#   PROBE_SUFFIX=_noload bench/gemm_vs_cutlass.sh -DCUSYNC_SM90_PROBE_NO_LOAD
# (sm_90a, static runtime: built anywhere, run on any H100/H200).
#   scripts/pipeline_sides.sh OUTDIR [ROUNDS]
set -uo pipefail
OUT=${1:?usage: scripts/pipeline_sides.sh OUTDIR [ROUNDS]}
ROUNDS=${2:-3}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
P=build/probe
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > "$OUT/smi.csv" &
smi=$!
# Each build's SASS: the probes drop HGMMA (_nomma) or UTMALDG (_noload) from the chain kernels only.
for x in "" _nomma _noload; do
  cuobjdump -sass $P/gemm_vs_cutlass$x 2>/dev/null | awk -v b="gemm_vs_cutlass$x" '
    /Function :/ { own = ($0 ~ /chain_kernel/) }
    /HGMMA/ { h[own]++ } /UTMALDG/ { t[own]++ }
    END { printf "%s: chain kernels HGMMA %d UTMALDG %d; CUTLASS HGMMA %d UTMALDG %d\n", b, h[1], t[1], h[0], t[0] }'
done | tee "$OUT/sass.txt"
run() { local log=$1; shift; echo "-- $* (HARNESS_BACK_TO_BACK=${HARNESS_BACK_TO_BACK:-0})" >> "$OUT/$log";
        timeout 150 "$@" >> "$OUT/$log" 2>&1; echo "$* b2b=${HARNESS_BACK_TO_BACK:-0} -> rc $?"; }
for b2b in 0 1; do
  export HARNESS_BACK_TO_BACK=$b2b
  for x in "" _nomma _noload; do
    run few.log $P/gemm_vs_cutlass$x "$ROUNDS" few
  done
  run few.log python3 bench/cublas_gemms.py "$ROUNDS" few
  for x in "" _nomma _noload; do
    run many.log $P/gemm_vs_cutlass$x "$ROUNDS"
  done
  run many.log python3 bench/cublas_gemms.py "$ROUNDS" many
done
kill $smi
python3 bench/pipeline_sides.py "$OUT" | tee "$OUT/table.txt"
