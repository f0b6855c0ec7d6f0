#!/usr/bin/env bash
# Energy per GEMM under sustained load, on a GPU machine: nvidia-smi (every 100 ms) beside
# `gemm_vs_cutlass sustain M N K SECONDS` for each harness binary and shape, then
# bench/energy.py joins the two logs (time, clock, power, energy per GEMM per variant).
# With CUBLAS=1 (the default) cuBLAS through torch runs each shape too (bench/cublas_sustain.py).
#   [BINARIES="build/probe/gemm_vs_cutlass ..."] [CUBLAS=0] scripts/sustain_round.sh OUTDIR SECONDS "M N K" ["M N K" ...]
set -uo pipefail
OUT=${1:?usage: scripts/sustain_round.sh OUTDIR SECONDS "M N K" ...}; SECONDS_EACH=${2:?seconds}; shift 2
[[ $# -gt 0 ]] || { echo "no shape given"; exit 2; }
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
sleep 1
for b in ${BINARIES:-build/probe/gemm_vs_cutlass}; do
  [[ -x $b ]] || { echo "missing $b"; continue; }
  for shape in "$@"; do
    echo "== $(basename "$b") $shape"
    # shellcheck disable=SC2086
    "$b" sustain $shape "$SECONDS_EACH"
  done
done > "$OUT/sustain.log" 2>&1
if [[ ${CUBLAS:-1} == 1 ]]; then
  for shape in "$@"; do
    echo "== cublas $shape"
    # shellcheck disable=SC2086
    python3 bench/cublas_sustain.py $shape "$SECONDS_EACH"
  done >> "$OUT/sustain.log" 2>&1
fi
kill "$smi"
python3 bench/energy.py "$OUT/sustain.log" "$OUT/smi.csv" --json "$OUT/energy.json"
