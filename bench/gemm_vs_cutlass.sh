#!/usr/bin/env bash
# Builds a harness, bench/$HARNESS.cu (default gemm_vs_cutlass; or
# conv_vs_cutlass, conv_pair_sync, mlp_pair_trace), into build/probe/$HARNESS (sm_90a, static CUDA runtime:
# the binary runs on any H100/H200 machine as it is).
#   [HARNESS=conv_vs_cutlass] [PROBE_SUFFIX=_x] bench/gemm_vs_cutlass.sh [extra nvcc flags, e.g. -DCUSYNC_SM90_PHASE_TIMES]
set -euo pipefail
cd "$(dirname "$0")/.."
HARNESS=${HARNESS:-gemm_vs_cutlass}
CUTLASS=${CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')}
mkdir -p build/probe
out=build/probe/$HARNESS${PROBE_SUFFIX:-}
# A function that only calls itself hangs the launch that reaches it; GCC >= 12 refuses one.
strict=()
if echo 'int f();' | g++ -Werror=infinite-recursion -x c++ -fsyntax-only - 2>/dev/null; then
  strict=(-Xcompiler=-Werror=infinite-recursion)
fi
nvcc -O3 -DNDEBUG -std=c++20 "${strict[@]}" --generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
  -I ffi/include -I ffi -I bench -isystem "$CUTLASS" -isystem "$CUTLASS/../tools/util/include" "$@" "bench/$HARNESS.cu" -o "$out"
echo "built $out"
