#!/usr/bin/env bash
# Builds every harness binary that scripts/harness_round.sh runs, in parallel
# (one nvcc per binary; on a 16-core GPU machine the set takes about as long as
# its slowest member). build/ is not committed, so a fresh checkout rebuilds.
#   [CUTLASS_INCLUDE=...] [JOBS=N] [SKIP_BUILT=1] scripts/build_probes.sh [LOGDIR]
# Built on a machine without a GPU, they travel to the GPU machine compressed (about 9x; the set
# is over 100 MB as it is):
#   mkdir -p build/carry && tar cf - -C build probe | xz -T0 -3 > build/carry/probe.tar.xz
#   (there) tar xJf build/carry/probe.tar.xz -C build && scripts/harness_round.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:-build/probe}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$LOG" build/probe
git rev-parse --short HEAD > build/probe/BUILT_AT 2>/dev/null || echo "not a git checkout" > build/probe/BUILT_AT
# harness  suffix  nvcc flags
cat > build/probe/variants <<'EOF'
conv_pair_sync _
conv_pair_sync _phases -DCUSYNC_SM90_PHASE_TIMES
conv_vs_cutlass _
conv_vs_cutlass _phases -DCUSYNC_SM90_PHASE_TIMES
gemm_vs_cutlass _
gemm_vs_cutlass _phases -DCUSYNC_SM90_PHASE_TIMES
halo_conv_probe _
halo_pair_probe _
halo_pair_probe _stamps -DCUSYNC_HALO_STAMPS
mlp_pair_trace _
mlp_pair_trace _trace -DCUSYNC_SM90_TILE_TRACE
mlp_pair_trace _stride67 -DCUSYNC_SM90_UNIT_STRIDE=67
mlp_pair_trace _stride67_trace -DCUSYNC_SM90_UNIT_STRIDE=67 -DCUSYNC_SM90_TILE_TRACE
EOF
build_one() {
  local harness=$1 suffix=$2; shift 2
  [[ $suffix == _ ]] && suffix=
  # SKIP_BUILT=1: keep binaries already there (a second pass after adding variants).
  if [[ ${SKIP_BUILT:-0} == 1 && -x build/probe/$harness$suffix ]]; then echo "kept $harness$suffix"; return; fi
  if HARNESS=$harness PROBE_SUFFIX=$suffix bench/gemm_vs_cutlass.sh "$@" > "$LOG/build-$harness$suffix.log" 2>&1; then
    echo "built $harness$suffix"
  else
    echo "FAILED $harness$suffix (see $LOG/build-$harness$suffix.log)"
  fi
}
export -f build_one
export LOG SKIP_BUILT
xargs -P "$JOBS" -L 1 bash -c 'build_one "$@"' _ < build/probe/variants
