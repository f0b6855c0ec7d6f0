#!/usr/bin/env bash
# Where the Hopper GEMM kernel stalls, per SASS instruction: Nsight Compute's
# warp-stall sampling of one launch of the kernel (bench/profile_gemm.py), with
# the 30 most-sampled instructions of each profiled kernel printed. Run after a
# build (for example SKIP_TESTS=1 SKIP_BENCH=1 scripts/gpu_check.sh OUTDIR).
#
#   scripts/ncu_gemm.sh OUTDIR M N K [extra bench/profile_gemm.py arguments]
#
# NCU_KERNELS: the kernel-name regex (default: ours only; "chain_kernel|nvjet|gemm"
# adds XLA's cuBLAS or Triton kernel of the same shape, launched in the same range).
set -uo pipefail
OUTDIR=${1:?usage: scripts/ncu_gemm.sh OUTDIR M N K [args]}
M=${2:?M}; N=${3:?N}; K=${4:?K}; shift 4
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
KERNELS=${NCU_KERNELS:-chain_kernel}
name="$OUTDIR/ncu_${M}x${N}x${K}"
# The summary sections, then the per-instruction source page (CSV).
timeout -k 10 200 ncu --profile-from-start off --kernel-name "regex:$KERNELS" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section InstructionStats --section WarpStateStats \
  --section SchedulerStats --section LaunchStats \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.txt" 2>&1
echo "summary sections: rc $? ($name.txt)"
timeout -k 10 200 ncu --profile-from-start off --kernel-name "regex:$KERNELS" \
  --section SourceCounters --page source --print-source sass --csv \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.sass.csv" 2>&1
echo "source page: rc $? ($name.sass.csv)"
"$PY" bench/ncu_top.py "$name.sass.csv"
