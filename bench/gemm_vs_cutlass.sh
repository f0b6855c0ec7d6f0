#!/usr/bin/env bash
# Builds bench/gemm_vs_cutlass.cu into build/probe/gemm_vs_cutlass (sm_90a,
# static CUDA runtime: the binary runs on any H100/H200 machine as it is).
#   bench/gemm_vs_cutlass.sh [extra nvcc flags, e.g. -DCUSYNC_SM90_STAGES=7]
set -euo pipefail
cd "$(dirname "$0")/.."
CUTLASS=${CUTLASS_INCLUDE:-$(python3 -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')}
mkdir -p build/probe
out=build/probe/gemm_vs_cutlass${PROBE_SUFFIX:-}
nvcc -O3 -DNDEBUG -std=c++20 --generate-code=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr \
  -I ffi/include -I ffi -isystem "$CUTLASS" -isystem "$CUTLASS/../tools/util/include" "$@" bench/gemm_vs_cutlass.cu -o "$out"
echo "built $out"
