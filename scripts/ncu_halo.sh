#!/usr/bin/env bash
# Where the halo conv (kernel family 2) stalls: Nsight Compute's summary
# sections and warp-stall samples per SASS instruction of one conv 1 launch of
# build/probe/halo_pair_probe (built by HARNESS=halo_pair_probe
# bench/gemm_vs_cutlass.sh), then the samples by region of the consumer's
# code and the most-sampled instructions (bench/ncu_top.py).
#
#   scripts/ncu_halo.sh OUTDIR [BATCH [H W]]     (default 32 56 56)
set -uo pipefail
OUTDIR=${1:?usage: scripts/ncu_halo.sh OUTDIR [BATCH [H W]]}
N=${2:-32}; H=${3:-56}; W=${4:-56}
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
name="$OUTDIR/ncu_halo_${N}x${H}x${W}"
# Launch 8: past the probe's check launches and its warm-up calls, a conv 1
# launch of the timed loop.
timeout -k 10 200 ncu --set full --import-source no -k regex:halo --launch-skip 8 --launch-count 1 \
  -o "$name" build/probe/halo_pair_probe "$N" "$H" "$W" > "$name.run.txt" 2>&1
echo "profile: rc $? ($name.ncu-rep)"
ncu -i "$name.ncu-rep" --page details > "$name.txt" 2>&1
ncu -i "$name.ncu-rep" --page source --csv --print-source sass > "$name.sass.csv" 2>&1
grep -E "Duration|Elapsed Cycles|Compute \(SM\) Throughput|L1/TEX Cache Throughput|highest-utilized" "$name.txt"
# The consumer's code comes first in the SASS (stop 27's profiles): its turn
# wait, its full wait, the path to its first wgmma, the MMAs, the epilogue
# after the last wait for them; the producer's code follows the exit.
"$PY" bench/ncu_top.py "$name.sass.csv" --top 25 --mark "turn wait=SYNCS.PHASECHK" \
  --mark "full wait=SYNCS.PHASECHK" --mark "record to first wgmma=BAR.SYNC" --mark "mma=HGMMA" \
  --mark "epilogue=DEPBAR.LE gsb0, 0x0" --mark "exit=EXIT" --mark "producer=ATOMG|UTMALDG"
