#!/usr/bin/env bash
# One pass of GPU work on a machine without internet: install the wheels
# brought along in .whl/, build and install the package, run the GPU tests and
# the MLP benchmark, and leave logs and results in OUTDIR.
#
#   scripts/gpu_check.sh OUTDIR
#
# Environment (all optional):
#   CUSYNC_COMMIT, CUSYNC_DIRTY  commit measured and 0/1 for uncommitted changes
#                                (the tree on a device machine is not a git checkout)
#   GPU_TESTS                    pytest arguments (default: -m gpu tests)
#   BENCH_ARGS                   extra arguments of bench/mlp.py (default: the full sweep; name
#                                variants to leave out in BENCH_SKIP, not with --skip here: the
#                                auto phase's own --skip would replace them)
#   BENCH_SKIP                   variants the sweep leaves out (bench/mlp.py --skip; the auto
#                                phase leaves them out too), e.g. the streams and StridedSync rows,
#                                the fastest of ours in no case of h200-mlp.json or h100-mlp.json,
#                                to fit a short call
#   SKIP_TESTS=1, SKIP_BENCH=1   leave a phase out
#   TUNE=1                       after the benchmark: bench/tune.py on its result into OUTDIR/tuned,
#                                then xla, serial, RowSync-fused and auto again with that table
#                                (CUSYNC_JAX_TUNED_DIR) into OUTDIR/auto: auto's choices checked on
#                                the GPU that measured them, in one call
#   BUILD_DIR                    CMake build folder (default build/gpu-check; another keeps a second
#                                configuration from rebuilding the first)
#   TEST_TIMEOUT, BENCH_TIMEOUT  seconds before a phase is stopped (default 420, 360; the whole GPU
#                                suite took ~260 s at 1bcdcf8, after a ~120 s build)
set -uo pipefail

OUTDIR=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
status=0
phase() { echo "== $* ($(date +%H:%M:%S))"; }

phase "environment"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  "$PY" -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__, jax.devices())' 2>&1
  echo "commit ${CUSYNC_COMMIT:-unknown} dirty ${CUSYNC_DIRTY:-unknown}"
} | tee "$OUTDIR/env.txt"

if compgen -G ".whl/*.whl" > /dev/null; then
  phase "installing wheels from .whl/"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/cusync-wheels .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/cusync-wheels${PYTHONPATH:+:$PYTHONPATH}
fi

phase "building (log: build.log)"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
export CUDAFLAGS="${CUDAFLAGS:-} --threads 0"  # compile the sm_80 and sm_90a passes in parallel
start=$(date +%s)
if ! "$PY" -m pip install --no-build-isolation --no-deps -v -C build-dir="${BUILD_DIR:-build/gpu-check}" . > "$OUTDIR/build.log" 2>&1; then
  tail -40 "$OUTDIR/build.log"
  echo "build failed"
  exit 1
fi
echo "built in $(( $(date +%s) - start )) s"

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  phase "GPU tests (log: pytest.log)"
  # shellcheck disable=SC2086
  timeout -k 10 "${TEST_TIMEOUT:-420}" "$PY" -P -m pytest -p no:cacheprovider -q -rfEs --timeout 120 \
    ${GPU_TESTS:--m gpu tests} > "$OUTDIR/pytest.log" 2>&1
  rc=$?
  grep -E "^(FAILED|ERROR)" "$OUTDIR/pytest.log" | head -20
  tail -1 "$OUTDIR/pytest.log"
  [[ $rc == 124 ]] && echo "GPU tests stopped after ${TEST_TIMEOUT:-420} s"
  [[ $rc != 0 ]] && status=1
fi

if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
  phase "MLP benchmark (log: bench.log)"
  # shellcheck disable=SC2086
  timeout -k 10 "${BENCH_TIMEOUT:-360}" "$PY" bench/mlp.py --out-dir "$OUTDIR" \
    --commit "${CUSYNC_COMMIT:-unknown}" ${CUSYNC_DIRTY:+--dirty "$CUSYNC_DIRTY"} ${BENCH_ARGS:-} \
    ${BENCH_SKIP:+--skip $BENCH_SKIP} > "$OUTDIR/bench.log" 2>&1
  rc=$?
  sed -n '/best synced variant/,$p' "$OUTDIR/bench.log"
  [[ $rc == 124 ]] && echo "benchmark stopped after ${BENCH_TIMEOUT:-360} s (results so far are in OUTDIR)"
  [[ $rc != 0 ]] && { tail -20 "$OUTDIR/bench.log"; status=1; }
fi
if [[ "${TUNE:-0}" == 1 && "${SKIP_BENCH:-0}" != 1 ]]; then
  phase "tuned table (OUTDIR/tuned) and the auto rows with it (log: auto.log)"
  result=$(compgen -G "$OUTDIR/*-mlp.json" | head -1)
  if [[ -z "$result" ]] || ! "$PY" bench/tune.py "$result" --out-dir "$OUTDIR/tuned"; then
    echo "no table written"
    status=1
  else
    # shellcheck disable=SC2086
    CUSYNC_JAX_TUNED_DIR="$OUTDIR/tuned" timeout -k 10 "${BENCH_TIMEOUT:-360}" "$PY" bench/mlp.py \
      --out-dir "$OUTDIR/auto" --commit "${CUSYNC_COMMIT:-unknown}" ${CUSYNC_DIRTY:+--dirty "$CUSYNC_DIRTY"} \
      ${BENCH_ARGS:-} --skip serial-sk TileSync-streams TileSync-fused RowSync-streams \
      'StridedSync(2)-streams' 'StridedSync(2)-fused' ${BENCH_SKIP:-} > "$OUTDIR/auto.log" 2>&1
    rc=$?
    sed -n '/best synced variant/,$p' "$OUTDIR/auto.log"
    [[ $rc != 0 ]] && { tail -20 "$OUTDIR/auto.log"; status=1; }
  fi
fi
phase "done (status $status)"
exit $status
