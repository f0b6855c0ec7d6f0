#!/bin/bash
# One device session for v4: build, correctness checks, then v3/v4 timings
# alternated in rounds. Logs under $OUT. Run from the repository root.
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/v4out}
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > $OUT/smi.txt 2>&1
t0=$(date +%s)
if ! ffi/sm90_dev/build_v4.sh .cutlass/include /tmp/chain_dev_v4 > $OUT/build.log 2>&1; then
  echo "BUILD FAILED"; tail -40 $OUT/build.log; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s"; cat $OUT/build.log
t1=$(date +%s)
timeout ${CHECK_S:-60} /tmp/chain_dev_v4 check > $OUT/check.log 2>&1; echo "check rc=$? $(( $(date +%s) - t1 )) s"
grep -E "FAIL|passed|error" $OUT/check.log; grep -c " ok$" $OUT/check.log
t2=$(date +%s)
timeout ${BENCH_S:-150} /tmp/chain_dev_v4 bench ${ROUNDS:-3} > $OUT/bench.log 2>&1; echo "bench rc=$? $(( $(date +%s) - t2 )) s"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >> $OUT/smi.txt 2>&1
sed -n '/== medians/,$p' $OUT/bench.log
