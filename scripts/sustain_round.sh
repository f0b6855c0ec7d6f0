#!/usr/bin/env bash
# Energy per GEMM under sustained load, on a GPU machine: nvidia-smi (every 100 ms) beside
# `gemm_vs_cutlass sustain M N K SECONDS` for each harness binary and shape, then
# bench/energy.py joins the two logs (time, clock, power, energy per GEMM per variant).
#   [BINARIES="build/probe/gemm_vs_cutlass ..."] scripts/sustain_round.sh OUTDIR SECONDS "M N K" ["M N K" ...]
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
kill "$smi"
python3 bench/energy.py "$OUT/sustain.log" "$OUT/smi.csv" --json "$OUT/energy.json"
