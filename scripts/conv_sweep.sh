#!/usr/bin/env bash
# One part of bench/conv.py's sweep (device timing) on a GPU machine: builds
# and installs the package first where this machine has none yet, then times
# the given batches. The parts of one commit merge with bench/merge_results.py.
#   scripts/conv_sweep.sh OUTDIR COMMIT BATCH [BATCH ...]
# CONV_TIMEOUT: seconds before the sweep is stopped (default 560).
set -uo pipefail
OUT=${1:?usage: scripts/conv_sweep.sh OUTDIR COMMIT BATCH...}; C=${2:?commit}; shift 2
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
R=$PWD
export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
if ! (cd /tmp && python3 -c "import cusync_jax._cusync_cuda" 2> /dev/null); then
  echo "no package here yet: building"
  CUSYNC_COMMIT=$C CUSYNC_DIRTY=0 SKIP_BENCH=1 SKIP_TESTS=1 scripts/gpu_check.sh "$OUT" > "$OUT/check.log" 2>&1
  tail -2 "$OUT/check.log"
fi
tag=$(echo "$@" | tr ' ' '-')
start=$(date +%s)
(cd /tmp && timeout "${CONV_TIMEOUT:-560}" python3 "$R/bench/conv.py" --batches "$@" --commit "$C" --dirty 0 \
  --out "$OUT/conv-b$tag.json" > "$OUT/conv-b$tag.log" 2>&1)
echo "rc $? in $(( $(date +%s) - start )) s"
grep -v "^W\|^I0\|^E0" "$OUT/conv-b$tag.log" | tail -14
