#!/usr/bin/env bash
# The halo conv (kernel family 2) on a GPU machine, one call: builds and
# installs the package where this machine has none yet, runs its GPU tests,
# then bench/conv.py's halo rows (whole, split along the channel blocks, and
# fused) beside XLA, one layer at a time under its own timeout (a layer that
# hangs costs its timeout, not the round), and merges the layers' results.
# Everything lands in OUTDIR (a cut-off call still returns what it wrote).
#   [LAYERS="..."] [BATCHES="1 4 8 16 32"] [LAYER_TIMEOUT=90] [CONV_ARGS="--residual --out-activation relu"] [SKIP_TESTS=1] \
#     scripts/halo_round.sh OUTDIR COMMIT
set -uo pipefail
OUT=${1:?usage: scripts/halo_round.sh OUTDIR COMMIT}; C=${2:?commit}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
R=$PWD
export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
log() { echo "$*" | tee -a "$OUT/round.log"; }
if ! (cd /tmp && python3 -c "import cusync_jax._cusync_cuda" 2> /dev/null); then
  log "building ($(date +%H:%M:%S))"
  CUSYNC_COMMIT=$C CUSYNC_DIRTY=0 SKIP_BENCH=1 SKIP_TESTS=1 scripts/gpu_check.sh "$OUT/check" > "$OUT/check.log" 2>&1
  log "$(tail -2 "$OUT/check.log")"
fi
if [[ -z ${SKIP_TESTS:-} ]]; then
  log "halo GPU tests ($(date +%H:%M:%S))"
  timeout -k 5 ${TEST_TIMEOUT:-150} python3 -P -m pytest -p no:cacheprovider -q -rfEs --timeout 60 -m gpu \
    tests/test_gpu_conv.py -k "halo or tuned" > "$OUT/pytest-halo.log" 2>&1
  log "pytest rc $?: $(tail -1 "$OUT/pytest-halo.log")"
fi
LAYERS=${LAYERS:-"resnet-28x28x128 resnet-14x14x256 resnet-7x7x512 vgg19-14x14x512 vgg19-28x28x512 vgg19-56x56x256 vgg19-112x112x64-128"}
parts=()
for layer in $LAYERS; do
  start=$(date +%s)
  # shellcheck disable=SC2086
  (cd /tmp && timeout -k 5 "${LAYER_TIMEOUT:-90}" python3 "$R/bench/conv.py" --layers "$layer" \
    --batches ${BATCHES:-1 4 8 16 32} --only halo-serial halo-Conv2DTileSync-fused ${CONV_ARGS:-} \
    --commit "$C" --dirty 0 --out "$OUT/halo-$layer.json" > "$OUT/halo-$layer.log" 2>&1)
  log "$layer: rc $? in $(( $(date +%s) - start )) s"
  [[ -s $OUT/halo-$layer.json ]] && parts+=("$OUT/halo-$layer.json")
  grep -v "Warn\|warn_once" "$OUT/halo-$layer.log" | tail -6 >> "$OUT/round.log"
done
[[ ${#parts[@]} -gt 0 ]] && python3 bench/merge_results.py "$OUT/conv-halo-layers.json" "${parts[@]}" 2>&1 | tee -a "$OUT/round.log"
cat "$OUT/round.log"
