#!/bin/bash
# Builds chain_dev_v4 from the repository root: the kernel units in parallel.
# usage: ffi/sm90_dev/build_v4.sh <cutlass include dir> <output binary>
set -e
INC=$1
OUT=$2
D=ffi/sm90_dev
TMP=$(mktemp -d)
FLAGS="-O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -I$INC -Iffi/include -Iffi -I$D"
pids=()
for u in 0 1 2 3 4; do
  nvcc $FLAGS -Xptxas -v -c $D/chain_dev_v4_inst_$u.cu -o $TMP/u$u.o > $TMP/u$u.log 2>&1 & pids+=($!)
done
nvcc $FLAGS -DCHAIN_DEV_SPLIT -c $D/chain_dev_v4.cu -o $TMP/main.o > $TMP/main.log 2>&1 & pids+=($!)
rc=0
for p in "${pids[@]}"; do wait $p || rc=1; done
cat $TMP/*.log | grep -E "error|spill|stack frame" | grep -v " 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" || true
if [ $rc -ne 0 ]; then cat $TMP/*.log | grep -B2 -A5 error | head -80; exit 1; fi
nvcc -gencode=arch=compute_90a,code=sm_90a $TMP/*.o -o $OUT
