"""synced_mlp on a CUDA GPU against the float32 jnp reference, for every
policy x mode x dtype, ragged sizes, long jitted loops, several ops in one
jit, donated inputs, and compute-sanitizer. Skipped (not failed) where no GPU
or no CUDA backend is available."""
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cusync_jax as cs
from cusync_jax.kernels import CUDA_CONFIGS
from helpers import TOL, mlp_inputs, rel_err

pytestmark = pytest.mark.gpu

DTYPES = [pytest.param(jnp.float16, id="f16"), pytest.param(jnp.bfloat16, id="bf16")]
MODES = ("serial", "streams", "fused")
POLICIES = {"gelu": (cs.TileSync(), cs.RowSync()),
            "swiglu": (cs.TileSync(), cs.RowSync(), cs.StridedSync(2))}
RUNS = [(act, mode, pol) for act in POLICIES for mode in MODES
        for pol in (POLICIES[act][:1] if mode == "serial" else POLICIES[act])]


def run(ops, activation, **kw):
    x, w1, w2, b1, b2 = ops
    f = jax.jit(lambda x, w1, w2, b1, b2: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2,
                                                        activation=activation, **kw))
    return f(x, w1, w2, b1, b2)


def reference(ops, activation):
    x, w1, w2, b1, b2 = ops
    return cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation)


def check(ops, activation, **kw):
    y = run(ops, activation, **kw)
    x, _, w2, _, _ = ops
    assert y.dtype == x.dtype and y.shape == x.shape[:-1] + (w2.shape[1],)
    err = rel_err(y, reference(ops, activation))
    assert err < TOL[x.dtype.type], (kw, err)
    return y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation,mode,policy", RUNS,
                         ids=[f"{a}-{m}-{type(p).__name__}" for a, m, p in RUNS])
def test_policy_mode_dtype_match_reference(activation, mode, policy, dtype):
    # Ragged everywhere: tokens not a multiple of any tile height, ffn and out
    # not multiples of the tile widths.
    for i, tokens in enumerate((1, 77, 300)):
        ops = mlp_inputs(1000 * i + len(activation) + MODES.index(mode), tokens, 256, 392, 264,
                         dtype, swiglu=activation == "swiglu")
        check(ops, activation, policy=policy, mode=mode)


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=[c.name for c in CUDA_CONFIGS])
@pytest.mark.parametrize("mode", ["streams", "fused"])
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_every_compiled_tile(config, mode, activation):
    ops = mlp_inputs(7, 333, 384, 520, 392, jnp.float16, swiglu=activation == "swiglu")
    if activation == "swiglu" and not config.swiglu:
        with pytest.raises(ValueError, match="no SwiGLU form"):
            run(ops, activation, tile=config.tile, mode=mode, policy="rowsync")
        return
    check(ops, activation, tile=config.tile, mode=mode, policy="rowsync")


# A tile per GEMM (serial and streams launch each GEMM on its own): the
# consumer's waits read the producer's tiling, not its own.
TILE_PAIRS = [((128, 128, 64), (128, 192, 64)), ((128, 192, 64), (128, 128, 64)),
              ((128, 256, 64), (128, 96, 64)), ((128, 96, 64), (128, 256, 64)),
              ((96, 128, 64), (128, 128, 64)), ((128, 256, 64), (96, 128, 64))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pair", TILE_PAIRS, ids=lambda p: f"{p[0][0]}x{p[0][1]}-{p[1][0]}x{p[1][1]}")
@pytest.mark.parametrize("mode,policy", [("serial", "rowsync"), ("streams", "tilesync"),
                                         ("streams", "rowsync")])
def test_a_tile_per_gemm(pair, mode, policy, dtype):
    for tokens in (77, 1000):
        ops = mlp_inputs(tokens + pair[0][1], tokens, 384, 1160, 392, dtype)
        check(ops, "gelu", tile=pair, mode=mode, policy=policy)
    if pair[0][1] in (128, 256):
        ops = mlp_inputs(3, 333, 384, 520, 392, dtype, swiglu=True)
        check(ops, "swiglu", tile=pair, mode=mode, policy=policy)


def test_a_tile_per_gemm_with_stream_k_on_one():
    ops = mlp_inputs(5, 1000, 2048, 1024, 392, jnp.float16)
    check(ops, "gelu", tile=((128, 128, 64), (128, 192, 64)), mode="serial", stream_k=(True, False))
    check(ops, "gelu", tile=((128, 192, 64), (128, 128, 64)), mode="serial", stream_k=(False, True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["streams", "fused"])
@pytest.mark.parametrize("policy", ["tilesync", "rowsync"])
def test_tile96_consumer_k_blocks_span_two_producer_tiles(dtype, mode, policy):
    # 96-wide producer tiles: the consumer's 64-wide k-block [64, 128) reads
    # producer tiles 0 and 1 of its row (ffn 520: the last tile 40 wide).
    ops = mlp_inputs(19, 300, 384, 520, 392, dtype)
    check(ops, "gelu", tile=(128, 96, 64), mode=mode, policy=policy)


@pytest.mark.parametrize("schedule", ["pingpong", "cooperative"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_tokens_as_n_tiles_every_edge(activation, dtype, schedule):
    # 96x128 tiles run the product transposed and store the accumulators
    # transposed (lane pairs): one token, a partial last row tile (95, 97,
    # 300), whole ones (96, 288), a last column tile 8 wide (ffn 520), without
    # and with biases; every mode, each policy, both GEMMs on it or one; both
    # MMA forms (a cooperative SwiGLU tile swaps gate and up factors between
    # its warpgroups).
    t96, t128 = (96, 128, 64), (128, 128, 64)
    kw = dict(mma_schedule=schedule)
    for i, tokens in enumerate((1, 95, 96, 97, 288, 300)):
        ops = mlp_inputs(100 + i, tokens, 384, 520, 264, dtype, swiglu=activation == "swiglu")
        check(ops, activation, tile=(t96, t128), mode="serial", **kw)
        check(ops, activation, tile=(t128, t96), mode="serial", **kw)
        for policy in POLICIES[activation]:
            check(ops, activation, tile=t96, mode="fused", policy=policy, **kw)
            check(ops, activation, tile=(t96, t128), mode="streams", policy=policy, **kw)
    ops = mlp_inputs(7, 200, 384, 520, 264, dtype, swiglu=activation == "swiglu", bias=False)
    check(ops, activation, tile=t96, mode="fused", policy="rowsync", **kw)


@pytest.mark.parametrize("activation", ["identity", "relu", "gelu_tanh", "silu"])
def test_other_activations(activation):
    ops = mlp_inputs(11, 200, 256, 256, 256, jnp.bfloat16)
    check(ops, activation, mode="fused", policy="tilesync")


OPTIMIZATIONS = [
    cs.Optimizations(False, False, False, False),
    cs.Optimizations(True, True, True, True, True),
    cs.Optimizations(avoid_wait_kernel=False, reorder_tile_loads=True),
    cs.Optimizations(reorder_tile_loads=False, release_store_posts=False),
]


@pytest.mark.parametrize("opt", OPTIMIZATIONS, ids=lambda o: f"bits{o.bits()}")
@pytest.mark.parametrize("mode", ["streams", "fused"])
@pytest.mark.parametrize("policy", ["tilesync", "rowsync"])
def test_optimizations_many_waves(opt, mode, policy):
    # 16 x 32 producer tiles of 128x128 and 16 x 8 consumer tiles: several
    # waves, so consumers really wait on producers still running.
    ops = mlp_inputs(13, 2000, 512, 4096, 1024, jnp.float16)
    check(ops, "gelu", tile=(128, 128, 32), policy=policy, mode=mode, optimizations=opt)


@pytest.mark.parametrize("order,band", [("row_major", 8), ("column_major", 8), ("grouped", 8),
                                        ("grouped", 3)])
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize("policy", ["tilesync", "rowsync"])
def test_tile_orders_many_waves(order, band, activation, policy):
    # 2100 tokens: 17 tile rows of 128, so the grouped order ends in a ragged band.
    ops = mlp_inputs(19, 2100, 512, 2816, 1024, jnp.float16, swiglu=activation == "swiglu")
    device = cs.planner.device_model(jax.devices()[0])
    for mode in ("serial", "streams", "fused"):
        plan = cs.plan_mlp(2100, 512, 2816, 1024, activation=activation, device=device,
                           policy=policy, mode=mode, order=order, group_rows=band).plan
        check(ops, activation, plan=plan)


def _hopper() -> bool:
    return str(getattr(jax.devices()[0], "compute_capability", "0")).startswith("9")


@pytest.mark.parametrize("tile", [(128, 128, 64), (96, 128, 64)], ids=["128x128", "96x128"])
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize("mode,policy", [("serial", "rowsync"), ("streams", "tilesync"), ("fused", "rowsync"),
                                         ("fused", "tilesync")])
def test_mma_schedules_compute_the_same_numbers(activation, mode, policy, tile):
    # Pingpong and cooperative run the same wgmma sequence per tile (only which
    # warpgroup holds which rows, or weight columns, differs; a cooperative
    # SwiGLU 96x128 tile does the pingpong form's arithmetic after swapping
    # factors), so the outputs are bitwise equal. 1100 tokens x ffn 2816:
    # 9 x 22 producer tiles of 128x128 (12 x 22 of 96x128), more than two a
    # CTA, where auto runs pingpong; ragged rows and out columns.
    if not _hopper():
        pytest.skip("mma_schedule is a choice of the Hopper kernel")
    device = cs.planner.device_model(jax.devices()[0])
    ops = mlp_inputs(41, 1100, 512, 2816, 1000, jnp.bfloat16, swiglu=activation == "swiglu")
    ys = []
    for schedule in ("pingpong", "cooperative"):
        plan = cs.plan_mlp(1100, 512, 2816, 1000, activation=activation, device=device, policy=policy,
                           mode=mode, tile=tile, mma_schedule=schedule).plan
        assert plan.mma_schedule == schedule and plan.kernel == 1
        ys.append(np.asarray(check(ops, activation, plan=plan)))
    np.testing.assert_array_equal(ys[0], ys[1])


CLUSTER_RUNS = [(mode, pol) for mode in MODES for pol in ("tilesync", "rowsync")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,policy", CLUSTER_RUNS, ids=[f"{m}-{p}" for m, p in CLUSTER_RUNS])
def test_cluster2_matches_reference(mode, policy, dtype):
    # 2x1 clusters (cluster_m=2): a position is a pair of row tiles. Tokens
    # 1 and 77: one row tile, so the peer CTA of the only pair has no rows;
    # 300: three row tiles (an odd count, a ragged last tile); 1500: twelve
    # (even, ragged last); 2100: seventeen over several waves. ffn and out
    # are not multiples of 128 (the second B half of the last column tile is
    # out of range where the remainder is <= 64).
    if not _hopper():
        pytest.skip("cluster_m=2 runs on the Hopper kernel")
    device = cs.planner.device_model(jax.devices()[0])
    for i, (tokens, hidden, ffn, out) in enumerate([(1, 256, 392, 264), (77, 256, 392, 264),
                                                     (300, 256, 392, 264), (1500, 512, 2120, 1000),
                                                     (2100, 512, 2816, 1048)]):
        ops = mlp_inputs(300 + i, tokens, hidden, ffn, out, dtype)
        plan = cs.plan_mlp(tokens, hidden, ffn, out, activation="gelu", device=device, policy=policy,
                           mode=mode, cluster_m=2).plan
        assert plan.cluster_m == 2 and plan.kernel == 1
        check(ops, "gelu", plan=plan)


@pytest.mark.parametrize("order,band", [("row_major", 8), ("column_major", 8), ("grouped", 8),
                                        ("grouped", 3), ("grouped", 1)])
@pytest.mark.parametrize("policy", ["tilesync", "rowsync"])
def test_cluster2_tile_orders(order, band, policy):
    # The pair grid takes the order over ceil(rows / 2) pair rows; 2100 tokens:
    # 17 tile rows, 9 pair rows, ragged bands.
    if not _hopper():
        pytest.skip("cluster_m=2 runs on the Hopper kernel")
    ops = mlp_inputs(53, 2100, 512, 2816, 1024, jnp.bfloat16)
    device = cs.planner.device_model(jax.devices()[0])
    for mode in ("serial", "streams", "fused"):
        plan = cs.plan_mlp(2100, 512, 2816, 1024, activation="gelu", device=device, policy=policy,
                           mode=mode, order=order, group_rows=band, cluster_m=2).plan
        check(ops, "gelu", plan=plan)


def test_cluster2_repeats_exactly():
    # Same plan, same inputs: every tile sums in one order, so calls agree
    # bit for bit (a broken schedule broadcast or barrier shows up here).
    if not _hopper():
        pytest.skip("cluster_m=2 runs on the Hopper kernel")
    x, w1, w2, b1, b2 = mlp_inputs(59, 1100, 512, 4096, 512, jnp.float16)
    device = cs.planner.device_model(jax.devices()[0])
    plan = cs.plan_mlp(1100, 512, 4096, 512, activation="gelu", device=device, policy="tilesync",
                       mode="fused", cluster_m=2).plan
    f = jax.jit(lambda x: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, activation="gelu", plan=plan))
    y0 = f(x)
    assert rel_err(y0, reference((x, w1, w2, b1, b2), "gelu")) < TOL[jnp.float16]
    for _ in range(50):
        np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(y0))


def test_swiglu_strided_many_waves():
    ops = mlp_inputs(17, 1500, 512, 2816, 1024, jnp.bfloat16, swiglu=True)
    for mode in ("streams", "fused"):
        check(ops, "swiglu", policy=cs.StridedSync(2), mode=mode)


def test_leading_dimensions_fold_into_tokens():
    ops = mlp_inputs(19, 50, 128, 256, 128, jnp.float16, lead=(3,))
    check(ops, "gelu", mode="streams")


@pytest.mark.parametrize("mode,policy", [("streams", "tilesync"), ("streams", "rowsync"),
                                         ("fused", "tilesync"), ("fused", "rowsync")])
def test_thousand_calls_in_a_jitted_loop(mode, policy):
    # Every iteration rolls x by its index, so the loop body cannot be
    # hoisted; each tile always sums in the same order, so every call must
    # equal the first call's rows exactly (a race shows up as a mismatch).
    x, w1, w2, b1, b2 = mlp_inputs(23, 1024, 512, 4096, 512, jnp.float16)
    call = lambda v: cs.synced_mlp(v, w1, w2, b1=b1, b2=b2, activation="gelu", mode=mode,
                                   policy=policy, tile=(128, 128, 32))
    y0 = jax.jit(call)(x)
    assert rel_err(y0, reference((x, w1, w2, b1, b2), "gelu")) < TOL[jnp.float16]

    @jax.jit
    def loop(x, y0):
        def body(i, worst):
            y = call(jnp.roll(x, i, axis=0))
            diff = jnp.max(jnp.abs(y.astype(jnp.float32) - jnp.roll(y0, i, axis=0).astype(jnp.float32)))
            return jnp.maximum(worst, diff)
        return jax.lax.fori_loop(0, 1000, body, jnp.float32(0))

    assert float(loop(x, y0)) == 0.0


def test_two_synced_mlps_in_one_jit():
    a = mlp_inputs(29, 700, 256, 1024, 384, jnp.float16)
    b = mlp_inputs(31, 300, 512, 512, 256, jnp.float16, swiglu=True)

    @jax.jit
    def both(a, b):
        ya = cs.synced_mlp(a[0], a[1], a[2], b1=a[3], b2=a[4], activation="gelu", mode="streams")
        yb = cs.synced_mlp(b[0], b[1], b[2], b1=b[3], b2=b[4], activation="swiglu", mode="streams")
        yc = cs.synced_mlp(a[0], a[1], a[2], b1=a[3], b2=a[4], activation="gelu", mode="fused")
        return ya, yb, yc

    ya, yb, yc = both(a, b)
    assert rel_err(ya, reference(a, "gelu")) < TOL[jnp.float16]
    assert rel_err(yb, reference(b, "swiglu")) < TOL[jnp.float16]
    np.testing.assert_array_equal(np.asarray(ya), np.asarray(yc))


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=[c.name for c in CUDA_CONFIGS])
@pytest.mark.parametrize("mode,policy", [("serial", "rowsync"), ("streams", "tilesync"), ("fused", "rowsync"),
                                         ("fused", "tilesync")])
def test_y_in_x_buffer_chained_and_with_x_needed_after(config, mode, policy):
    # out == hidden: y may take x's buffer. Chained in a loop (XLA hands the
    # carry's buffer to y) and with x read after the call (XLA copies x).
    # Eight row tiles, so consumer tiles store while producer tiles of later
    # rows still read x.
    x, w1, w2, b1, b2 = mlp_inputs(43, 1000, 512, 1024, 512, jnp.float16)
    step = lambda v: cs.synced_mlp(v, w1, w2, b1=b1, b2=b2, tile=config.tile, mode=mode, policy=policy)
    ref = lambda v: cs.mlp_reference(v, w1, w2, b1=b1, b2=b2)
    got = jax.jit(lambda v: jax.lax.fori_loop(0, 3, lambda _, u: step(u), v))(x)
    assert rel_err(got, ref(ref(ref(x)))) < 3 * TOL[jnp.float16]
    got = jax.jit(lambda v: step(v) + v)(x)
    assert rel_err(got, ref(x) + x) < TOL[jnp.float16]


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
@pytest.mark.parametrize("shape", [(333, 384, 520, 392), (1000, 2048, 1024, 392), (77, 392, 264, 1000)],
                         ids=["short-k", "long-k", "ragged-k"])
def test_stream_k_matches_reference(activation, shape):
    # Short k: ranges of one k-block, so a tile has up to k-blocks segments;
    # long k: ranges across tile boundaries; ragged k: a last k-block TMA
    # fills with zeros. Both GEMMs stream-K, and each alone (128x128x64, the
    # stream-K instances).
    tokens, hidden, ffn, out = shape
    ops = mlp_inputs(47, tokens, hidden, ffn, out, jnp.bfloat16, swiglu=activation == "swiglu")
    want = reference(ops, activation)
    for stream_k in ((True, True), (True, False), (False, True)):
        y = run(ops, activation, tile=(128, 128, 64), mode="serial", stream_k=stream_k)
        assert rel_err(y, want) < TOL[jnp.bfloat16], stream_k


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 4096, 768, 392), (1000, 2048, 1024, 392), (77, 392, 264, 1000)],
                         ids=["even-split", "long-k", "ragged-k"])
def test_stream_k_128x192_matches_reference(shape, dtype):
    # 128x192 stream-K (cooperative). Even split: each 192-column row of 4
    # tiles fits its 66 CTAs, so every tile is cut into 16 equal ranges of 4
    # k-blocks (cusync/stream_k.h); long k: ranges across tile boundaries.
    tokens, hidden, ffn, out = shape
    ops = mlp_inputs(59, tokens, hidden, ffn, out, dtype)
    want = reference(ops, "gelu")
    for stream_k in ((True, True), (True, False), (False, True)):
        y = run(ops, "gelu", tile=(128, 192, 64), mode="serial", stream_k=stream_k)
        assert rel_err(y, want) < TOL[dtype], stream_k
    y = run(ops, "gelu", tile=((128, 192, 64), (128, 128, 64)), mode="serial", stream_k=(True, True))
    assert rel_err(y, want) < TOL[dtype]


def test_stream_k_in_a_loop_of_calls():
    # Counts are zeroed every call, partial sums rewritten, and a tile's
    # segments are summed in one order whichever finishes last: a long loop
    # of stream-K calls gives the same bits every time.
    x, w1, w2, b1, b2 = mlp_inputs(53, 768, 1024, 2048, 1024, jnp.float16)
    for tile in ((128, 128, 64), (128, 192, 64)):
        f = lambda v: cs.synced_mlp(v, w1, w2, b1=b1, b2=b2, mode="serial", tile=tile, stream_k=True)
        once = jax.jit(f)(x)
        assert rel_err(once, reference((x, w1, w2, b1, b2), "gelu")) < TOL[jnp.float16]
        # (x + 0 * u: each call depends on the carry, so XLA cannot hoist it.)
        many = jax.jit(lambda v: jax.lax.fori_loop(0, 50, lambda _, u: f(x + 0 * u), v))(x)
        np.testing.assert_array_equal(np.asarray(many), np.asarray(once))


@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_overlapped_launches_read_the_finished_producer(activation):
    # Serial mode launches the consumer as a programmatic dependent of the
    # producer: its CTAs start, and load B, while producer CTAs still run.
    # 88 producer tiles leave SMs idle, so consumer CTAs start at once; the
    # consumer must still read every h tile only once the producer is done.
    # Bitwise equal to the same plan launched plainly, in a loop of calls
    # (each call's producer rewrites h), and whole tiles beside stream-K.
    ops = mlp_inputs(61, 256, 1024, 2816, 1024, jnp.float16, swiglu=activation == "swiglu")
    x, w1, w2, b1, b2 = ops
    want = reference(ops, activation)
    for stream_k in ((False, False), (False, True)):
        outs = []
        for overlap in (True, False):
            opt = cs.Optimizations(overlap_launches=overlap)
            f = lambda v: cs.synced_mlp(v, w1, w2, b1=b1, b2=b2, activation=activation, mode="serial",
                                        tile=(128, 128, 64), stream_k=stream_k, optimizations=opt)
            once = jax.jit(f)(x)
            assert rel_err(once, want) < TOL[jnp.float16], (overlap, stream_k)
            many = jax.jit(lambda v: jax.lax.fori_loop(0, 30, lambda i, u: f(x + 0 * u), v))(x)
            np.testing.assert_array_equal(np.asarray(many), np.asarray(once))
            outs.append(np.asarray(once))
        np.testing.assert_array_equal(outs[0], outs[1])


def test_donated_inputs():
    ops = mlp_inputs(37, 256, 512, 768, 512, jnp.bfloat16)
    want = reference(ops, "gelu")
    x, w1, w2, b1, b2 = (jnp.array(a, copy=True) for a in ops)
    f = jax.jit(lambda x, w1, w2, b1, b2: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, mode="streams"),
                donate_argnums=(0,))
    y = f(x, w1, w2, b1, b2)
    assert rel_err(y, want) < TOL[jnp.bfloat16]
    assert x.is_deleted()


def test_float32_is_refused_with_a_clear_message():
    ops = mlp_inputs(41, 64, 128, 128, 128, jnp.float32)
    with pytest.raises(TypeError, match="float16 and bfloat16"):
        run(ops, "gelu", mode="fused")  # refused when lowered, before anything runs


def test_unknown_tile_is_refused():
    ops = mlp_inputs(43, 64, 128, 128, 128, jnp.float16)
    with pytest.raises(ValueError, match="no kernel for tile"):
        run(ops, "gelu", tile=(64, 64, 32), mode="fused")


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_clean(tool):
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        pytest.skip("compute-sanitizer is not on the PATH")
    case = os.path.join(os.path.dirname(__file__), "sanitizer_case.py")
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
               XLA_PYTHON_CLIENT_ALLOCATOR="platform")
    base = [exe, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", "9"]
    # Check only this project's kernels (XLA's are not ours to check, and
    # instrumenting them multiplies the run time).
    cmd = base + ["--kernel-name", "kns=mlp_sm80", sys.executable, case]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=100)
    out = proc.stdout + proc.stderr
    if "ERROR SUMMARY" not in out and "RACECHECK SUMMARY" not in out:
        proc = subprocess.run(base + [sys.executable, case], env=env, capture_output=True,
                              text=True, timeout=100)
        out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "sanitizer case: ok" in out, out[-4000:]
    assert "0 errors" in out or "0 hazards" in out, out[-4000:]
