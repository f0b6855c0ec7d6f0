"""synced_conv_pair on the CPU tile executor against lax.conv_general_dilated
(float32), its errors, and stress runs with random per-tile delays."""
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cusync_jax as cs
from helpers import TOL, conv_inputs, rel_err

POLICIES = [cs.Conv2DTileSync(3, 3), cs.TileSync(), cs.RowSync()]
MODES = ["fused", "streams", "serial"]


def synced(x, k1, k2, b1, b2, res=None, **kw):
    return cs.synced_conv_pair(x, k1, k2, b1=b1, b2=b2, residual=res, **kw)


def reference(x, k1, k2, b1, b2, res=None, **kw):
    return cs.conv_pair_reference(x, k1, k2, b1=b1, b2=b2, residual=res, **kw)


# Every policy in every mode in float32; the narrow dtypes in the fused mode.
NUMERICS = ([(p, m, jnp.float32) for p in POLICIES for m in MODES]
            + [(p, "fused", d) for p in POLICIES for d in (jnp.float16, jnp.bfloat16)])


@pytest.mark.parametrize("policy,mode,dtype", NUMERICS,
                         ids=[f"{type(p).__name__}-{m}-{jnp.dtype(d).name}" for p, m, d in NUMERICS])
def test_numerics_every_policy_mode_dtype(policy, mode, dtype):
    # 2 images of 7x7: 98 pixel rows in 16-row tiles, so tiles straddle image
    # rows and images; 24-wide channel tiles leave ragged edges.
    ops = conv_inputs(11, 2, 7, 7, 8, 64, 24, dtype, residual=True)
    f = jax.jit(lambda *a: synced(*a, policy=policy, mode=mode, tile=(16, 24, 16)))
    y = f(*ops)
    assert y.dtype == dtype and y.shape == (2, 7, 7, 24)
    assert rel_err(y, reference(*ops)) < TOL[dtype]


@pytest.mark.parametrize("n,h,w,c0,c1,c2,f1,f2,tile,policy", [
    (1, 7, 7, 64, 64, 64, 3, 3, None, "auto"),          # ResNet's 64-channel pair, default tiles
    (3, 13, 13, 16, 32, 16, 3, 3, (32, 16, 16), "auto"),
    (3, 13, 13, 16, 32, 16, 3, 3, (32, 16, 16), cs.RowSync()),
    (1, 56, 56, 4, 8, 4, 3, 3, (128, 8, 8), "auto"),    # the ResNet spatial size, small channels
    (2, 3, 5, 256, 128, 512, 3, 3, None, "auto"),       # wide channels at a tiny spatial size
    (2, 1, 1, 512, 512, 64, 3, 3, None, cs.RowSync()),  # 1x1 image: only the centre tap is inside
    (32, 3, 3, 8, 16, 8, 3, 3, (16, 16, 16), "auto"),   # batch 32
    (2, 7, 7, 64, 32, 64, 1, 1, (16, 16, 16), "auto"),  # 1x1 filters
    (2, 7, 7, 64, 32, 64, 1, 1, (16, 16, 16), cs.RowSync()),
    (2, 7, 13, 32, 64, 32, 3, 1, (16, 32, 32), "auto"),
    (2, 13, 7, 24, 48, 40, 1, 3, (24, 16, 24), cs.TileSync()),
])
def test_shapes_filters_and_batches(n, h, w, c0, c1, c2, f1, f2, tile, policy):
    ops = conv_inputs(n * h + c1, n, h, w, c0, c1, c2, jnp.float32, f1=f1, f2=f2)
    y = synced(*ops, policy=policy, tile=tile)
    assert y.shape == (n, h, w, c2)
    assert rel_err(y, reference(*ops)) < 1e-4


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu", "identity"])
def test_activations_residual_and_no_bias(activation):
    x, k1, k2, _, _, res = conv_inputs(3, 2, 7, 7, 16, 32, 16, jnp.float32, bias=False,
                                       residual=True)
    y = cs.synced_conv_pair(x, k1, k2, activation=activation, residual=res, tile=(16, 16, 16))
    want = cs.conv_pair_reference(x, k1, k2, activation=activation, residual=res)
    assert rel_err(y, want) < 1e-4


@pytest.mark.parametrize("opts", [
    cs.Optimizations(False, False, False, False),
    cs.Optimizations(hardware_block_order=True),
])
@pytest.mark.parametrize("order", ["row_major", "column_major"])
def test_optimizations_and_tile_orders(opts, order):
    import dataclasses
    ops = conv_inputs(4, 2, 7, 7, 16, 32, 16, jnp.float32)
    base = cs.plan_conv_pair(2, 7, 7, 16, 32, 16, device="cpu", tile=(16, 16, 16),
                             optimizations=opts).plan
    plan = dataclasses.replace(base, order1=order, order2=order)
    assert rel_err(synced(*ops, plan=plan), reference(*ops)) < 1e-4


def test_intermediate_is_the_activated_first_conv():
    x, k1, k2, b1, b2, _ = conv_inputs(5, 2, 7, 7, 8, 16, 8, jnp.float32)
    plan = cs.plan_conv_pair(2, 7, 7, 8, 16, 8, device="cpu", tile=(16, 16, 16)).plan
    _, h, sync = cs.synced_conv_pair_p.bind(x, k1, b1, k2, b2, jnp.zeros((0,)), plan=plan,
                                            activation="relu", out_activation="identity")
    want = jax.nn.relu(jax.lax.conv_general_dilated(x, k1, (1, 1), "SAME",
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC")) + b1)
    assert rel_err(h, want) < 1e-5
    # Every producer tile posted once (Conv2DTileSync: one semaphore per tile).
    tiles = 7  # ceil(98 pixels / 16) rows x 1 column of 16 channels
    assert sync.shape == (8 + tiles,) and np.all(np.asarray(sync[8:]) == 1)


def test_empty_batch():
    x, k1, k2, b1, b2, _ = conv_inputs(6, 1, 7, 7, 8, 16, 8, jnp.float32)
    y = synced(jnp.zeros((0, 7, 7, 8)), k1, k2, b1, b2)
    assert y.shape == (0, 7, 7, 8)


def test_vmap_shared_filters_fold_and_per_example_filters_loop():
    x, k1, k2, b1, b2, res = conv_inputs(7, 2, 7, 7, 8, 16, 8, jnp.float32, residual=True,
                                         lead=(3,))
    f = lambda x_, k1_, r_: synced(x_, k1_, k2, b1, b2, r_, tile=(16, 16, 16))
    ref = lambda x_, k1_, r_: reference(x_, k1_, k2, b1, b2, r_)
    y = jax.jit(jax.vmap(f, in_axes=(0, None, 0)))(x, k1, res)
    assert rel_err(y, jax.vmap(ref, in_axes=(0, None, 0))(x, k1, res)) < 1e-4
    # A residual shared by every batch element (x batched, residual not).
    y1 = jax.vmap(f, in_axes=(0, None, None))(x, k1, res[0])
    assert rel_err(y1, jax.vmap(ref, in_axes=(0, None, None))(x, k1, res[0])) < 1e-4
    k1s = jnp.stack([k1 * s for s in (1.0, -0.5, 2.0)])
    y2 = jax.jit(jax.vmap(f))(x, k1s, res)
    assert rel_err(y2, jax.vmap(ref)(x, k1s, res)) < 1e-4


@pytest.mark.parametrize("activation,f1,f2", [("relu", 3, 3), ("gelu", 3, 1), ("silu", 1, 3)])
def test_grad_matches_jnp(activation, f1, f2):
    ops = conv_inputs(8, 2, 5, 7, 8, 16, 8, jnp.float32, f1=f1, f2=f2, residual=True)

    def loss(fn, *args):
        return jnp.sum(jnp.sin(fn(*args, activation=activation)))  # a non-trivial cotangent

    argnums = tuple(range(6))
    g = jax.jit(jax.grad(lambda *a: loss(lambda *b, **kw: synced(*b, tile=(16, 8, 8), **kw), *a),
                         argnums=argnums))(*ops)
    gr = jax.grad(lambda *a: loss(reference, *a), argnums=argnums)(*ops)
    for name, a, b in zip(["x", "k1", "k2", "b1", "b2", "residual"], g, gr):
        assert rel_err(a, b) < 1e-4, name


def test_grad_bf16_without_residual():
    x, k1, k2, b1, b2, _ = conv_inputs(9, 2, 7, 7, 8, 16, 8, jnp.bfloat16)
    f = lambda x_, k1_: jnp.sum(synced(x_, k1_, k2, b1, b2).astype(jnp.float32) ** 2)
    fr = lambda x_, k1_: jnp.sum(reference(x_, k1_, k2, b1, b2) ** 2)
    g = jax.grad(f, argnums=(0, 1))(x, k1)
    gr = jax.grad(fr, argnums=(0, 1))(x.astype(jnp.float32), k1.astype(jnp.float32))
    assert g[0].dtype == jnp.bfloat16
    for a, b in zip(g, gr):
        assert rel_err(a, b) < 5e-2


def test_plan_auto_policy_follows_the_consumer_filter():
    assert cs.plan_conv_pair(1, 7, 7, 8, 8, device="cpu").policy == cs.Conv2DTileSync(3, 3)
    assert cs.plan_conv_pair(1, 7, 7, 8, 8, filter2=1, device="cpu").policy == cs.Conv2DTileSync(1, 1)
    # Named, the policy takes k2's filter; the CPU k-block stays inside one tap.
    rep = cs.plan_conv_pair(1, 7, 7, 24, 48, filter2=1, policy="conv2dtilesync", device="cpu")
    assert rep.policy == cs.Conv2DTileSync(1, 1) and rep.tile1.k == 24 and rep.tile2.k == 48
    # The wave model: 56x56x64 at batch 1 on an H200 fits both convs in one wave.
    rep = cs.plan_conv_pair(1, 56, 56, 64, 64, device="h200")
    assert (rep.tiles1, rep.waves_stream, rep.waves_synced) == (25, 2, 1)


# ---------------------------------------------------------------- bad input
_x = jnp.ones((2, 7, 7, 8))
_k1 = jnp.ones((3, 3, 8, 16))
_k2 = jnp.ones((3, 3, 16, 4))


@pytest.mark.parametrize("args,kwargs,exc,pattern", [
    ((jnp.ones((7, 7, 8)), _k1, _k2), {}, ValueError,
     r"x: expected an NHWC image batch \[N, H, W, C\] \(rank 4\), got shape \(7, 7, 8\)"),
    ((jnp.ones((2, 8, 7, 7)), _k1, _k2), {}, ValueError,
     r"k1: expected shape \[3, 3, 7, C1\] to match x's channels \(x shape \(2, 8, 7, 7\), NHWC\), "
     r"got shape \(3, 3, 8, 16\) \(if x is NCHW"),
    ((_x, jnp.ones((3, 8, 16)), _k2), {}, ValueError, r"k1: expected an HWIO filter .*rank 4.*\(3, 8, 16\)"),
    ((_x, jnp.ones((16, 8, 3, 3)), _k2), {}, ValueError,
     r"k1: expected an HWIO filter .*got shape \(16, 8, 3, 3\) \(this looks like OIHW"),
    ((_x, jnp.ones((2, 2, 8, 16)), _k2), {}, ValueError, r"k1: .*1x1 or 3x3 taps.*\(2, 2, 8, 16\)"),
    ((_x, _k1, jnp.ones((5, 5, 16, 4))), {}, ValueError, r"k2: .*1x1 or 3x3 taps.*\(5, 5, 16, 4\)"),
    ((_x, _k1, jnp.ones((3, 1, 16, 4))), {}, ValueError, r"k2: .*1x1 or 3x3 taps.*\(3, 1, 16, 4\)"),
    ((_x, jnp.ones((3, 3, 9, 16)), _k2), {}, ValueError,
     r"k1: expected shape \[3, 3, 8, C1\] to match x's channels .* got shape \(3, 3, 9, 16\)"),
    ((_x, _k1, jnp.ones((3, 3, 12, 4))), {}, ValueError,
     r"k2: expected shape \[3, 3, 16, C2\] to match k1's output channels \(k1 shape \(3, 3, 8, 16\)\), "
     r"got shape \(3, 3, 12, 4\)"),
    ((_x, jnp.ones((3, 3, 8, 0)), jnp.ones((3, 3, 0, 4))), {}, ValueError,
     r"k1: expected at least one channel \(last dimension\), got shape \(3, 3, 8, 0\)"),
    ((_x, _k1, _k2), {"b1": jnp.ones((8,))}, ValueError, r"b1: expected shape \(16,\), got shape \(8,\)"),
    ((_x, _k1, _k2), {"b2": jnp.ones((16,))}, ValueError, r"b2: expected shape \(4,\), got shape \(16,\)"),
    ((_x, _k1, _k2), {"residual": jnp.ones((2, 7, 7, 16))}, ValueError,
     r"residual: expected the output's shape \(2, 7, 7, 4\), got shape \(2, 7, 7, 16\)"),
    ((_x.astype(jnp.float16), _k1, _k2), {}, TypeError, r"k1: dtype float32 does not match x's dtype float16"),
    ((_x, _k1, _k2), {"residual": jnp.ones((2, 7, 7, 4), jnp.bfloat16)}, TypeError,
     r"residual: dtype bfloat16 does not match x's dtype float32"),
    ((_x.astype(jnp.int32), _k1.astype(jnp.int32), _k2.astype(jnp.int32)), {}, TypeError,
     r"x: expected float32, float16 or bfloat16, got int32"),
    ((_x, _k1, _k2), {"activation": "swiglu"}, ValueError, r"activation: 'swiglu' needs"),
    ((_x, _k1, _k2), {"activation": "tanh"}, ValueError, r"activation: expected one of"),
    ((_x, _k1, _k2), {"policy": cs.StridedSync(2)}, ValueError, r"policy: .*the conv pair takes"),
    ((_x, _k1, _k2), {"policy": cs.Conv2DTileSync(1, 1)}, ValueError,
     r"policy: Conv2DTileSync\(r=1, s=1\) does not match k2's 3x3 filter"),
    ((_x, _k1, _k2), {"policy": "fastest"}, ValueError, r"policy: expected 'auto'"),
    ((_x, _k1, _k2), {"mode": "parallel"}, ValueError, r"mode: expected 'auto' or one of"),
    ((_x, _k1, _k2), {"plan": cs.plan_mlp(8, 8, 8, device="cpu").plan}, TypeError,
     r"plan: expected a ConvPairPlan, got MlpPlan"),
])
def test_bad_input(args, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        cs.synced_conv_pair(*args, **kwargs)


def test_the_hopper_conv_split_sizes_its_stream_k_slots():
    # 7x7x512 at batch 1 on 128x128x64 tiles: 4 tiles a conv of 72 k-blocks.
    # Split 9 runs stream-K on 36 CTAs, ranges of 8 k-blocks; the layout gives
    # each tile stream_k.h's bound on the ranges it meets (72 / 8 + 1 = 10).
    plan = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", tile=(128, 128, 64), mode="serial",
                             split_k=(9, 1)).plan
    assert plan.kernel == 1 and plan.split_k == (9, 1)
    slots, _ = cs._cusync_cpu.stream_k_schedule(1, 4, 72, 36)
    assert slots == 10
    tile = 128 * 128
    words = cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 512), ((3, 3), (3, 3)), plan)
    # 8 header words and 4 semaphores, 4 + 4 counts, then 10 slots a producer
    # tile and 1 a consumer tile.
    assert words == 20 + 10 * 4 * tile + 1 * 4 * tile
    # The CUDA conv kernel (0) keeps one slot per share.
    cuda = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", mode="serial", split_k=(9, 1)).plan
    t = cuda.tile1
    tiles = -(-49 // t.m) * -(-512 // t.n)
    assert cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 512), ((3, 3), (3, 3)), cuda) == (
        -(-(8 + tiles + 2 * tiles) // 4) * 4 + (9 + 1) * tiles * t.m * t.n)


def test_the_hopper_conv_fused_mode_sizes_the_placed_schedule_flags():
    # 7x7x512 at batch 1 on 128x128x64 tiles: 4 tiles a conv. The fused
    # kernel's placed schedule takes a flag per tile of both convs, after the
    # 8 header words and the 4 semaphores; the other modes have none, nor the
    # CUDA conv kernel (0), whose fused mode keeps its counter.
    shape = (1, 7, 7, (512, 512, 512), ((3, 3), (3, 3)))
    words = {}
    for mode in ("serial", "streams", "fused"):
        plan = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", tile=(128, 128, 64), mode=mode,
                                 policy="rowsync").plan
        assert plan.kernel == 1
        words[mode] = cs.conv_planner.conv_sync_words(*shape, plan)
    assert words == {"serial": 12, "streams": 12, "fused": 12 + 4 + 4}
    cuda = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", mode="fused", policy="rowsync").plan
    assert cuda.kernel == 0
    t = cuda.tile1
    tiles = -(-49 // t.m) * -(-512 // t.n)
    assert cs.conv_planner.conv_sync_words(*shape, cuda) == 8 + tiles


@pytest.mark.parametrize("rows,cols,k_blocks,split", [
    (1, 4, 72, 8),    # 7x7x512 at batch 1 on 128x128x64 tiles
    (4, 4, 72, 8),    # 14x14x512 at batch 4
    (13, 4, 72, 2),   # 7x7x512 at batch 32
    (2, 2, 36, 6),    # 14x14x256 at batch 1
    (7, 1, 18, 3),    # 28x28x128 at batch 1
])
def test_the_hopper_conv_split_is_even_where_it_divides_the_k_blocks(rows, cols, k_blocks, split):
    # Stream-K over tiles x split CTAs (cusync/sync_layout.h, conv_stream_k):
    # each CTA runs one share of one tile, every tile in `split` equal shares.
    _, per_cta = cs._cusync_cpu.stream_k_schedule(rows, cols, k_blocks, rows * cols * split)
    assert len(per_cta) == rows * cols * split
    shares = {}
    for segments in per_cta:
        assert len(segments) == 1
        (row, col, kb0, kb1, slot, count), = segments
        assert kb1 - kb0 == k_blocks // split and count == split
        shares.setdefault((row, col), set()).add(slot)
    assert all(s == set(range(split)) for s in shares.values()) and len(shares) == rows * cols


def test_plan_conv_pair_bad_arguments():
    with pytest.raises(ValueError, match="height: expected a positive int"):
        cs.plan_conv_pair(1, 0, 7, 8, 8)
    with pytest.raises(ValueError, match=r"filter2: expected a 1x1 or 3x3 filter, got \(5, 5\)"):
        cs.plan_conv_pair(1, 7, 7, 8, 8, filter2=5)


def test_the_hopper_conv_is_opt_in_and_checked():
    # Kernel family 1 for a tile named explicitly (or a tuned-table entry), never the wave
    # model's choice.
    assert cs.plan_conv_pair(8, 28, 28, 128, 128, device="h200", policy="rowsync", mode="fused").plan.kernel == 0
    plan = cs.plan_conv_pair(8, 28, 28, 128, 128, device="h200", tile=(128, 128, 64), mode="serial").plan
    assert plan.kernel == 1 and plan.tile1 == cs.TileShape(128, 128, 64)
    assert cs.plan_conv_pair(1, 56, 56, 64, 64, device="h200", tile=(128, 64, 64)).plan.kernel == 1
    with pytest.raises(ValueError, match="is the Hopper conv's"):
        cs.plan_conv_pair(1, 56, 56, 64, 64, device="a100", tile=(128, 64, 64))
    with pytest.raises(ValueError, match="needs mid channels that are a multiple of 64 .* got 64, 96, 64"):
        cs.plan_conv_pair(1, 56, 56, 64, 96, 64, device="h200", tile=(128, 64, 64))
    with pytest.raises(ValueError, match="split_k: the Hopper conv splits k .* in mode 'serial' only"):
        cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", tile=(128, 128, 64), split_k=(2, 1))
    with pytest.raises(ValueError, match="runs both convolutions on"):
        cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", tile=((128, 128, 64), (128, 64, 32)), mode="serial")
    with pytest.raises(ValueError, match="the fused mode runs both convolutions in one kernel"):
        cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", tile=((128, 128, 64), (128, 64, 64)), mode="fused")


@pytest.mark.parametrize("c0,f", [(3, 3), (5, 1), (70, 3), (1, 3)])
def test_the_unfolded_first_conv_is_the_convolution(c0, f):
    # Each pixel's f x f window of c0 channels, in HWIO's (r, s, c) order, padded
    # with zero channels to whole 64-channel k-blocks; k1 reshaped to match.
    x, k1 = conv_inputs(c0 + f, 2, 9, 7, c0, 16, 16, jnp.float32, f1=f)[:2]
    windows, k = cs.conv_unfold.unfold_first_conv(x, k1)
    kp = cs.conv_unfold.unfolded_channels(c0, (f, f))
    assert kp % 64 == 0 and f * f * c0 <= kp < f * f * c0 + 64
    assert windows.shape == (2, 9, 7, kp) and k.shape == (1, 1, kp, 16)
    assert not np.any(np.asarray(windows[..., f * f * c0:])) and not np.any(np.asarray(k[0, 0, f * f * c0:]))
    conv = lambda a, b: jax.lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    assert rel_err(conv(windows, k), conv(x, k1)) < TOL[jnp.float32]


@pytest.mark.parametrize("policy,mode", [("conv2dtilesync", "fused"), ("tilesync", "streams"),
                                         ("rowsync", "fused"), ("conv2dtilesync", "serial")])
def test_an_rgb_input_runs_the_hopper_plan_unfolded(policy, mode):
    # The Hopper conv loads 64-channel taps, so its plan for a 3-channel input
    # runs conv 1 as a 1x1 conv over the unfolded windows (one k-block of 27
    # values and 37 zeros); the CPU executor runs the same plan.
    rep = cs.plan_conv_pair(2, 9, 7, 3, 64, 32, device="h200", tile=(128, 64, 64), policy=policy, mode=mode)
    assert rep.plan.unfold1 and rep.plan.kernel == 1
    assert rep.channels == (64, 64, 32) and rep.filters == ((1, 1), (3, 3))
    ops = conv_inputs(3, 2, 9, 7, 3, 64, 32, jnp.float32, residual=True)
    y = jax.jit(lambda *a: synced(*a, plan=rep.plan))(*ops)
    assert y.shape == (2, 9, 7, 32) and rel_err(y, reference(*ops)) < TOL[jnp.float32]
    # Gradients flow through the gather back to the image and the 3x3 filter.
    loss = lambda fn: lambda x, k1, b1: jnp.sum(fn(x, k1, ops[2], b1, ops[4], ops[5]) ** 2)
    got = jax.grad(loss(lambda *a: synced(*a, plan=rep.plan)), argnums=(0, 1, 2))(*ops[:2], ops[3])
    want = jax.grad(loss(reference), argnums=(0, 1, 2))(*ops[:2], ops[3])
    for g, w in zip(got, want):
        assert g.shape == w.shape and rel_err(g, w) < 1e-4
    with pytest.raises(ValueError, match=r"the producer conv has 1 k-blocks \(1x1 taps x 64 channels"):
        cs.plan_conv_pair(1, 7, 7, 3, 64, device="h200", tile=(128, 64, 64), mode="serial", split_k=(2, 1))


def test_split_k_is_checked_sizes_the_sync_buffer_and_runs_unsplit_on_the_cpu():
    # CUDA tiles 128x64x32: 7x7x512 at batch 1 has 8 tiles per conv of
    # 9 taps x 16 channel blocks = 144 k-blocks.
    rep = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", split_k=(16, 8), policy="rowsync",
                            mode="fused")
    plan = rep.plan
    assert plan.split_k == (16, 8) and not rep.fallback
    attrs = plan.attributes(0)
    assert (attrs["splits1"], attrs["splits2"]) == (16, 8)
    words = cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 512), ((3, 3), (3, 3)), plan)
    # Semaphores (8 tiles), a count per tile of each conv, then a 128x64 fp32
    # tile per share: 8 x 16 for the producer, 8 x 8 for the consumer.
    assert words == -(-(8 + 8 + 8 + 8) // 4) * 4 + (8 * 16 + 8 * 8) * 128 * 64
    unsplit = cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", policy="rowsync", mode="fused").plan
    assert cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 512), ((3, 3), (3, 3)), unsplit) == 8 + 8
    assert (cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", split_k=[2, 2]).plan.split_k
            == (2, 2))
    for bad in [(0, 1), (1,), 2, (2.0, 1), (True, 1)]:
        with pytest.raises(ValueError, match="split_k: expected"):
            cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", split_k=bad)
    with pytest.raises(ValueError, match="the consumer conv has 144 k-blocks"):
        cs.plan_conv_pair(1, 7, 7, 512, 512, device="h200", split_k=(1, 145))
    with pytest.raises(ValueError, match="the producer conv has 9 k-blocks"):
        cs.plan_conv_pair(1, 7, 7, 3, 64, device="h200", split_k=(10, 1))
    # The CPU executor runs the same math unsplit.
    ops = conv_inputs(9, 2, 7, 7, 16, 32, 16, jnp.float32, residual=True)
    split = cs.plan_conv_pair(2, 7, 7, 16, 32, 16, device="cpu", tile=(16, 16, 16),
                              split_k=(3, 2)).plan
    assert split.split_k == (3, 2)
    assert rel_err(synced(*ops, plan=split), reference(*ops)) < 1e-4


def test_handler_rechecks_shapes_when_python_is_bypassed():
    plan = cs.plan_conv_pair(2, 7, 7, 8, 16, 4, device="cpu").plan
    bad_k2 = jnp.ones((3, 3, 12, 4))
    with pytest.raises(Exception, match=r"1x1 or 3x3 HWIO filters that chain.*k2 \[3, 3, 12, 4\]"):
        jax.block_until_ready(cs.synced_conv_pair_p.bind(
            _x, _k1, jnp.ones((16,)), bad_k2, jnp.ones((4,)), jnp.zeros((0,)), plan=plan,
            activation="relu", out_activation="identity"))


# ------------------------------------------------------------------- stress
STRESS_TILE = (16, 16, 16)


def _run(ops, policy, mode, cpu):
    return np.asarray(synced(*ops, policy=policy, mode=mode, tile=STRESS_TILE, cpu=cpu))


@pytest.mark.timeout(300)
def test_random_delays_and_threads_give_identical_results():
    # 98 pixel rows x 32 channels: 7 x 2 producer tiles, halos of 8 pixels.
    ops = conv_inputs(21, 2, 7, 7, 8, 32, 16, jnp.float32, residual=True)
    expected = _run(ops, cs.TileSync(), "serial", cs.CpuOptions(threads=1))
    rng = random.Random(4321)
    for i in range(36):
        policy = rng.choice(POLICIES)
        mode = rng.choice(("fused", "streams"))
        cpu = cs.CpuOptions(threads=rng.randint(1, 6), delay_us=rng.choice((50, 200, 500)),
                            seed=rng.randrange(1 << 30), wait_timeout_ms=20_000)
        got = _run(ops, policy, mode, cpu)
        assert np.array_equal(got, expected), (i, policy, mode, cpu)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", [cs.RowSync(under_wait=1), cs.TileSync(under_wait=1),
                                    cs.Conv2DTileSync(3, 3, under_wait=1)],
                         ids=["RowSync", "TileSync", "Conv2DTileSync"])
def test_stress_catches_a_policy_that_waits_on_too_few_tiles(policy):
    # 4 producer column tiles per row, so RowSync(under_wait=1) still waits,
    # just for one post too few.
    ops = conv_inputs(22, 2, 7, 7, 8, 64, 16, jnp.float32)
    expected = _run(ops, cs.TileSync(), "serial", cs.CpuOptions(threads=1))
    rng = random.Random(77)
    for _ in range(40):
        cpu = cs.CpuOptions(threads=rng.randint(2, 6), delay_us=500, seed=rng.randrange(1 << 30))
        if not np.array_equal(_run(ops, policy, "streams", cpu), expected):
            return
    pytest.fail(f"{policy} read unfinished producer tiles in none of 40 delayed runs")


@pytest.mark.timeout(120)
def test_a_wait_that_can_never_be_satisfied_fails_instead_of_hanging():
    ops = conv_inputs(23, 1, 7, 7, 8, 16, 8, jnp.float32)
    cpu = cs.CpuOptions(threads=2, wait_timeout_ms=300)
    with pytest.raises(Exception, match="waits for posts that never come"):
        _run(ops, cs.Conv2DTileSync(3, 3, under_wait=-1), "fused", cpu)


def test_halo_conv_refuses_what_it_cannot_run():
    # The halo conv (kernel family 2): 3x3 filters, channels multiples of 64,
    # splits that divide a conv's input channel blocks.
    report = cs.plan_conv_pair(2, 56, 56, 64, 64, device="h200", tile=(128, 64, 576), mode="fused")
    plan = report.plan
    assert plan.kernel == 2
    # The report counts the halo tiling's tiles (padded rows), not pixels / 128.
    assert report.grid1 == report.grid2 == (2 * 26, 1)
    # A semaphore per conv 1 tile of the halo tiling: 26 tiles of 128 of an image's 56 x 58 positions.
    assert cs.conv_planner.conv_sync_words(2, 56, 56, (64, 64, 64), ((3, 3), (3, 3)), plan) == 8 + 2 * 26
    with pytest.raises(ValueError, match="3x3 filters"):
        cs.plan_conv_pair(1, 14, 14, 64, 64, filter2=1, device="h200", tile=(128, 64, 576))
    with pytest.raises(ValueError, match="multiples of 64"):
        cs.plan_conv_pair(1, 14, 14, 64, 64, 40, device="h200", tile=(128, 64, 576))
    with pytest.raises(ValueError, match="the producer conv has 1, which 2 shares do not divide"):
        cs.plan_conv_pair(1, 14, 14, 64, 64, device="h200", tile=(128, 64, 576), split_k=(2, 1))
    with pytest.raises(ValueError, match="the consumer conv has 4, which 3 shares do not divide"):
        cs.plan_conv_pair(1, 7, 7, 256, 256, device="h200", tile=(128, 64, 576), split_k=(2, 3))
    with pytest.raises(ValueError, match="'relu' or 'identity'"):
        cs.plan_conv_pair(1, 14, 14, 64, 64, device="h200", tile=(128, 64, 576), activation="gelu")


def test_halo_conv_reads_an_image_padded_to_8_channels():
    # VGG's RGB pair on the halo conv: conv 1's input and filter zero-padded
    # to 8 channels (16-byte pixels, one k-block of two taps a k16 step).
    report = cs.plan_conv_pair(2, 224, 224, 3, 64, device="h200", tile=(128, 64, 576), mode="fused")
    assert report.plan.kernel == 2 and report.plan.pixel8 and not report.plan.unfold1
    assert report.channels == (8, 64, 64) and report.filters == ((3, 3), (3, 3))
    # The wide tiling at 224: two tiles of 128 positions a row, the same for both convs.
    assert report.grid1 == report.grid2 == (2 * 224 * 2, 1)
    assert cs.conv_planner.conv_sync_words(2, 224, 224, (8, 64, 64), ((3, 3), (3, 3)), report.plan) == 8 + 2 * 448
    # 8 channels as given: nothing to pad.
    assert not cs.plan_conv_pair(1, 14, 14, 8, 64, device="h200", tile=(128, 64, 576)).plan.pixel8
    with pytest.raises(ValueError, match="does not split a conv over 8 input channels"):
        cs.plan_conv_pair(1, 14, 14, 3, 64, device="h200", tile=(128, 64, 576), split_k=(2, 1))
    with pytest.raises(ValueError, match=r"also 8 or fewer: an image, padded\); got \(20, 64, 64\)"):
        cs.plan_conv_pair(1, 14, 14, 20, 64, device="h200", tile=(128, 64, 576))
    # The op pads x and k1 before the kernel (here the CPU executor runs the
    # padded plan's math): XLA's values, and gradients of x's 3 channels.
    ops = conv_inputs(33, 2, 9, 11, 3, 64, 64, jnp.float32, residual=True)
    plan = cs.plan_conv_pair(2, 9, 11, 3, 64, device="h200", tile=(128, 64, 576), mode="fused").plan
    assert plan.pixel8
    y = jax.jit(lambda *a: synced(*a, plan=plan))(*ops)
    assert rel_err(y, reference(*ops)) < 1e-4
    w = jax.random.normal(jax.random.key(6), y.shape)
    got = jax.grad(lambda x, k1: jnp.sum(synced(x, k1, *ops[2:], plan=plan) * w), argnums=(0, 1))(*ops[:2])
    exp = jax.grad(lambda x, k1: jnp.sum(reference(x, k1, *ops[2:]) * w), argnums=(0, 1))(*ops[:2])
    for name, g, e in zip(("x", "k1"), got, exp):
        assert g.shape == e.shape and rel_err(g, e) < 1e-4, name


@pytest.mark.parametrize("halo", [True, False], ids=["halo-plan-fused", "cpu-plan-after"])
def test_out_activation_comes_after_the_residual_values_and_gradients(halo):
    # ResNet's block: relu(conv2(...) + b2 + x). A halo conv plan (kernel
    # family 2) applies the ReLU in its epilogue (here the CPU executor runs
    # the plan's math, the ReLU included); other plans apply it after the call.
    ops = conv_inputs(31, 1, 14, 14, 64, 64, 64, jnp.float32, residual=True)
    plan = (cs.plan_conv_pair(1, 14, 14, 64, 64, device="h200", tile=(128, 64, 576), mode="fused").plan
            if halo else cs.plan_conv_pair(1, 14, 14, 64, 64, device="cpu").plan)
    assert cs.conv.fuses_out_activation(plan, "relu") == halo
    f = jax.jit(lambda *a: synced(*a, plan=plan, out_activation="relu"))
    y = f(*ops)
    want = reference(*ops, out_activation="relu")
    assert rel_err(y, want) < 1e-4
    # The ReLU is last: some outputs are zero where the pre-ReLU sum was negative,
    # which relu(conv2) + x would not zero.
    assert float(jnp.mean(y == 0)) > 0.2 and rel_err(y, jax.nn.relu(reference(*ops[:5])) + ops[5]) > 0.1
    # Its derivative masks the cotangent of everything before it, the residual's included.
    w = jax.random.normal(jax.random.key(5), y.shape)
    loss = lambda fn: lambda *a: jnp.sum(fn(*a) * w)
    got = jax.grad(loss(lambda *a: synced(*a, plan=plan, out_activation="relu")), argnums=range(6))(*ops)
    exp = jax.grad(loss(lambda *a: reference(*a, out_activation="relu")), argnums=range(6))(*ops)
    for name, g, e in zip(("x", "k1", "k2", "b1", "b2", "residual"), got, exp):
        assert rel_err(g, e) < 1e-4, name


def test_out_activation_errors_name_the_argument():
    ops = conv_inputs(32, 1, 7, 7, 8, 8, 8, jnp.float32)
    with pytest.raises(ValueError, match="out_activation: expected one of"):
        synced(*ops, out_activation="tanh")
    with pytest.raises(ValueError, match="out_activation: 'swiglu'"):
        synced(*ops, out_activation="swiglu")


def test_halo_conv_split_sync_buffer_holds_counts_and_every_shares_sums():
    # Split along its input channel blocks, a conv adds a count per output
    # tile (zeroed with the semaphores) and each share's 128 x 64 fp32 sums.
    plan = cs.plan_conv_pair(1, 7, 7, 512, 512, 256, device="h200", tile=(128, 64, 576), mode="serial",
                             split_k=(8, 2)).plan
    assert plan.kernel == 2 and plan.split_k == (8, 2)
    out1, out2 = 1 * 8, 1 * 4  # one position tile of a 7x7 image; 512 and 256 output channels
    header = 8 + out1 + out1 + out2
    partials = (header + 3) // 4 * 4
    want = partials + (8 * out1 + 2 * out2) * 128 * 64
    assert cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 256), ((3, 3), (3, 3)), plan) == want
    # Split in one conv only: the other has no sums.
    plan = cs.plan_conv_pair(1, 7, 7, 512, 512, 256, device="h200", tile=(128, 64, 576), mode="fused",
                             split_k=(1, 4)).plan
    assert cs.conv_planner.conv_sync_words(1, 7, 7, (512, 512, 256), ((3, 3), (3, 3)), plan) == (
        (8 + out1 + out1 + out2 + 3) // 4 * 4 + 4 * out2 * 128 * 64)


@pytest.mark.parametrize("n,h,w", [(1, 56, 56), (2, 7, 7), (3, 13, 13), (1, 5, 150), (2, 3, 300), (1, 1, 1),
                                   (1, 40, 126), (1, 9, 128), (2, 14, 14), (1, 28, 28), (1, 3, 190), (1, 6, 61),
                                   (3, 6, 6), (1, 8, 6), (24, 7, 7), (25, 3, 5), (23, 7, 7), (2, 57, 57),
                                   (1, 5, 100)])
@pytest.mark.parametrize("row_tiles", [False, True], ids=["positions", "rows"])
def test_halo_tiling_covers_every_pixel_once_and_waits_on_exactly_the_tiles_it_reads(n, h, w, row_tiles):
    # The halo conv's tiling (cusync/halo_tiling.h), shared by its kernel's
    # stores and waits: every output pixel belongs to one tile, and a tile's
    # dependencies are exactly the tiles that write a pixel of its halo.
    bw, rows, span, tiles = cs._cusync_cpu.halo_tiling(n, h, w, row_tiles)
    assert bw == (130 if w + 2 > 130 else w + 2)
    # Paired (an image's padded grid fits one 64-row chain, and enough images
    # to fill the GPU with half as many tiles): a tile is two images, chain c
    # (rows 64 c ..) image 2 t + c's positions from 0; its halo both images'
    # padded grids.
    paired = w + 2 <= 130 and h * bw <= 64 and n >= 24
    # Row tiles (narrow, not paired, BW <= 128): floor(128 / BW) whole padded rows a
    # tile, from position 0 of a row; positions past them computed, not stored.
    rowwise = row_tiles and w + 2 <= 128 and not paired
    assert span == ((128 // bw) * bw if rowwise else 128)
    if rowwise:
        assert rows == 128 // bw + 2 and all(a0 == 0 for _, _, _, a0, _ in tiles)

    def chains(index, image, h0, w0, a0):
        """(image, h0, w0, first position) of each 64-row chain of a tile."""
        if paired:
            return [(image, 0, 0, 0), (image + 1, 0, 0, 0)]
        return [(image, h0, w0, a0), (image, h0, w0, a0 + 64)]

    # A tile's second chain is live exactly where it owns a pixel there.
    live = cs._cusync_cpu.halo_second_half_live(n, h, w, row_tiles)
    want = [False] * len(tiles)
    for index, (image, h0, w0, a0, _) in enumerate(tiles):
        im, y0, x0, first = chains(index, image, h0, w0, a0)[1]
        for q in range(first, first + 64):
            if im < n and y0 + q // bw < h and x0 + q % bw < w and q - a0 < span:
                want[index] = True
    assert live == want
    assert cs._cusync_cpu.halo_one_chain(n, h, w, row_tiles) == (not any(want))
    owner = {}
    for index, (image, h0, w0, a0, _) in enumerate(tiles):
        for im, y0, x0, first in chains(index, image, h0, w0, a0):
            for q in range(first, first + 64):
                y, x = y0 + q // bw, x0 + q % bw
                if im < n and y < h and x < w and q - a0 < span:
                    assert (im, y, x) not in owner
                    owner[(im, y, x)] = index
    assert len(owner) == n * h * w
    if paired:
        # Each image's whole padded grid; a tile reads the tile of its own images only.
        assert rows == h + 2
        assert [deps for *_, deps in tiles] == [[i] for i in range(len(tiles))]
        return
    for image, h0, w0, a0, deps in tiles:
        # The halo box: rows h0 - 1 .. h0 + R - 2 and columns w0 - 1 .. w0 + BW - 2, clipped.
        read = {owner[(image, y, x)] for y in range(max(0, h0 - 1), min(h, h0 + rows - 1))
                for x in range(max(0, w0 - 1), min(w, w0 + bw - 1))}
        assert sorted(read) == deps
        if rowwise:
            # Tap (2, 2) of the tile's last pixel stays inside the box.
            assert (128 // bw - 1) * bw + w - 1 + 2 * bw + 2 < rows * bw
        else:
            # Tap (2, 2) of the tile's last position stays inside the box.
            assert a0 + 127 + 2 * bw + 2 < rows * bw


@pytest.mark.parametrize("n,h,w,channels,stages,row_tiles", [
    (1, 56, 56, (256, 256, 256), (1, 2), 2),  # VGG's 56x56x256: a 44.5 KB halo and a streamed B fit once
    (32, 56, 56, (64, 64, 64), (3, 4), 0),    # ResNet's first pair: B resident, three stages already
    (1, 56, 56, (64, 128, 64), (1, 2), 2),
    (1, 28, 28, (512, 512, 512), (2, 2), 0),  # two stages already
    (1, 112, 112, (64, 128, 128), (1, 1), 0),  # one row a tile saves too little to fit a second
    (1, 6, 150, (64, 128, 64), (1, 1), 0),    # wide: no row tiles
])
def test_halo_conv_takes_row_tiles_exactly_where_they_fit_a_second_stage(n, h, w, channels, stages, row_tiles):
    # cusync::plan_halo_tiling: the tiling the kernel runs, and the one its
    # sync buffer and the planner count tiles of.
    assert (cs._cusync_cpu.halo_stages(n, h, w, channels, False),
            cs._cusync_cpu.halo_stages(n, h, w, channels, True)) == stages
    assert cs._cusync_cpu.halo_plan_row_tiles(n, h, w, channels) == row_tiles
    _, _, _, tiles = cs._cusync_cpu.halo_tiling(n, h, w, row_tiles > 0)
    assert cs._cusync_cpu.halo_tile_count(n, h, w, channels) == len(tiles)
