#!/usr/bin/env bash
# The GEMM's pipeline sides under Nsight Compute: each kernel of the sides probe
# (bench/gemm_vs_cutlass.cu `sides`, built with -DCUSYNC_SM90_PROBE_SIDES) whole,
# loads alone and MMA alone, and cuBLAS's kernel of the same shape, at ncu's
# locked clocks (no power cap in the numbers: cycles per multiply-add by form).
# Profiles the first launch of each variant (the harness's correctness pass).
#   scripts/ncu_sides.sh OUTDIR "M N K" ["M N K" ...]
set -uo pipefail
OUT=${1:?usage: scripts/ncu_sides.sh OUTDIR "M N K" ...}; shift
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
BIN=build/probe/gemm_vs_cutlass_sides
OURS="regex:chain_kernel|device_kernel"
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,sm__pipe_tensor_op_hmma_cycles_active.avg,dram__bytes_read.sum,lts__t_bytes.sum,smsp__inst_executed.sum
ncu --query-metrics 2>/dev/null | grep -iE "pipe_shared|gmma|pipe_tensor|tma" > "$OUT/metric_names.txt"
for shape in "$@"; do
  read -r m n k <<< "$shape"
  tag=${m}x${n}x${k}
  timeout -k 10 240 ncu --kernel-name "$OURS" -c 22 --metrics "$METRICS" "$BIN" 1 sides $m $n $k \
    > "$OUT/metrics_$tag.txt" 2>&1; echo "metrics $tag: rc $?"
  timeout -k 10 120 ncu --kernel-name "regex:nvjet|gemm|Gemm" -c 1 --metrics "$METRICS" \
    python3 bench/cublas_gemms.py 1 $m $n $k > "$OUT/cublas_metrics_$tag.txt" 2>&1; echo "cublas $tag: rc $?"
  timeout -k 10 300 ncu --kernel-name "$OURS" -c 22 --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats "$BIN" 1 sides $m $n $k > "$OUT/sections_$tag.txt" 2>&1; echo "sections $tag: rc $?"
done
python3 bench/ncu_sides.py "$OUT" | tee "$OUT/table.txt"
