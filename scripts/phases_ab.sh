#!/usr/bin/env bash
# Phase stamps of several builds of the GEMM harness side by side: each shape
# runs every binary in turn, twice over (A B C A B C), so drift between
# launches shows as a difference between the two passes rather than between
# builds. The binaries are gemm_vs_cutlass built with -DCUSYNC_SM90_PHASE_TIMES
# (bench/gemm_vs_cutlass.sh, one PROBE_SUFFIX per build). One log per shape in
# OUTDIR, and the stamps that locate the prologue printed per binary.
#   [SHAPES="256 8192 2816;256 5632 8192"] scripts/phases_ab.sh OUTDIR BINARY [BINARY ...]
set -uo pipefail
OUT=${1:?usage: scripts/phases_ab.sh OUTDIR BINARY [BINARY ...]}
shift
mkdir -p "$OUT"
IFS=';' read -r -a shapes <<< "${SHAPES:-256 8192 2816;256 5632 8192}"
for shape in "${shapes[@]}"; do
  log="$OUT/phases-${shape// /x}.log"
  for pass in 1 2; do
    for bin in "$@"; do
      if [[ ! -x $bin ]]; then echo "missing $bin"; continue; fi
      echo "-- $(basename "$bin") pass $pass" >> "$log"
      # shellcheck disable=SC2086
      timeout 90 "$bin" phases $shape >> "$log" 2>&1
      echo "$(basename "$bin") phases $shape pass $pass -> rc $?"
    done
  done
  # The coop tile after idle: barriers, position, resolved, first TMA, first data, entry..exit.
  awk '/^-- /{b=$2" "$4} /own128coop_column +after idle/{on=1; next} /^phases/{on=0}
       on && /entry lag|barriers set|descriptors|loop entry|position|resolved|first TMA|mma has tile|mma waits|first data|entry..exit/{printf "%s  %s\n", b, $0}' "$log"
done
