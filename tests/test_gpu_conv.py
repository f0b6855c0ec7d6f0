"""synced_conv_pair on a CUDA GPU against lax.conv_general_dilated in float32.
Skipped (not failed) where no GPU or no CUDA backend is available."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import cusync_jax as cs
from helpers import TOL, conv_inputs, rel_err

pytestmark = pytest.mark.gpu

POLICIES = [cs.Conv2DTileSync(3, 3), cs.TileSync(), cs.RowSync()]
RUNS = [("serial", cs.Conv2DTileSync(3, 3))] + [(m, p) for m in ("streams", "fused") for p in POLICIES]


def synced(ops, **kw):
    x, k1, k2, b1, b2, res = ops
    return jax.jit(lambda *a: cs.synced_conv_pair(*a[:3], b1=a[3], b2=a[4], residual=a[5], **kw))(
        x, k1, k2, b1, b2, res)


def reference(ops):
    x, k1, k2, b1, b2, res = ops
    return cs.conv_pair_reference(x, k1, k2, b1=b1, b2=b2, residual=res)


def check_every_run(ops, run):
    """run(mode, policy) -> y for each of RUNS: each matches XLA, and all are
    bitwise equal (every tile accumulates in the same order whatever the
    schedule)."""
    x, _, k2 = ops[:3]
    want = reference(ops)
    results = {}
    for mode, policy in RUNS:
        y = run(mode, policy)
        assert y.dtype == x.dtype and y.shape == x.shape[:3] + (k2.shape[3],)
        assert rel_err(y, want) < TOL[x.dtype.type], (mode, policy)
        results[(mode, type(policy).__name__)] = np.asarray(y)
    first = next(iter(results.values()))
    for key, y in results.items():
        assert np.array_equal(y, first), key


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,size,c", [(1, 56, 64), (4, 28, 128), (8, 13, 256), (32, 7, 512),
                                      (2, 7, 64)])
def test_every_policy_and_mode_matches_xla_and_each_other(n, size, c, dtype):
    ops = conv_inputs(n * size + c, n, size, size, c, c, c, dtype, residual=True)
    check_every_run(ops, lambda mode, policy: synced(ops, policy=policy, mode=mode))


@pytest.mark.parametrize("c0,c1,c2,f1,f2", [(3, 64, 64, 3, 3), (64, 96, 40, 1, 3), (128, 64, 256, 3, 1),
                                            (24, 48, 8, 1, 1)])
def test_channel_counts_and_filters(c0, c1, c2, f1, f2):
    ops = conv_inputs(c0 + c1, 3, 13, 13, c0, c1, c2, jnp.float16, f1=f1, f2=f2)
    for mode, policy in RUNS:
        kw = {"policy": policy if not isinstance(policy, cs.Conv2DTileSync) else "conv2dtilesync"}
        assert rel_err(synced(ops, mode=mode, **kw), reference(ops)) < TOL[jnp.float16], (mode, policy)


@pytest.mark.parametrize("n,size,c0,c,split", [(1, 7, 512, 512, (16, 16)), (8, 14, 256, 256, (4, 2)),
                                               (2, 13, 64, 64, (3, 5)), (1, 13, 3, 64, (2, 1))])
def test_split_k_matches_xla_every_policy_and_mode(n, size, c0, c, split):
    # Split-K: shares of a tile's k-blocks on different CTAs, the last to
    # count adds the others' sums; producer tiles post once, from that share.
    # (c0 = 3: 9 k-blocks of one tap each, the 2-byte load path.)
    ops = conv_inputs(n + c + split[0], n, size, size, c0, c, c, jnp.float16, residual=True)
    want = reference(ops)
    for mode, policy in RUNS:
        plan = cs.plan_conv_pair(n, size, size, c0, c, c, device=cs.planner.device_model(jax.devices()[0]),
                                 policy=policy, mode=mode, split_k=split).plan
        assert plan.split_k == split
        assert rel_err(synced(ops, plan=plan), want) < TOL[jnp.float16], (mode, policy)


def test_repeated_fused_runs_are_identical():
    ops = conv_inputs(5, 16, 14, 14, 256, 256, 256, jnp.bfloat16)
    first = np.asarray(synced(ops, mode="fused", policy=cs.TileSync()))
    for _ in range(20):
        assert np.array_equal(np.asarray(synced(ops, mode="fused", policy=cs.TileSync())), first)


@pytest.mark.parametrize("opts", [cs.Optimizations(False, False, False, False),
                                  cs.Optimizations(hardware_block_order=True)])
def test_optimizations(opts):
    ops = conv_inputs(6, 4, 28, 28, 128, 128, 128, jnp.float16)
    for mode in ("streams", "fused"):
        y = synced(ops, mode=mode, optimizations=opts)
        assert rel_err(y, reference(ops)) < TOL[jnp.float16], mode


def test_grad_and_vmap():
    # An explicit mode runs the kernels (auto falls back to XLA's convolutions
    # at this size); relu's gradient reads the kernel's h.
    x, k1, k2, b1, b2, _ = conv_inputs(7, 2, 7, 7, 64, 64, 64, jnp.bfloat16, lead=(3,))
    f = lambda x_: jnp.sum(cs.synced_conv_pair(x_, k1, k2, b1=b1, b2=b2, mode="fused").astype(jnp.float32) ** 2)
    fr = lambda x_: jnp.sum(cs.conv_pair_reference(x_, k1, k2, b1=b1, b2=b2) ** 2)
    assert "cusync_synced_conv_pair" in str(jax.make_jaxpr(jax.vmap(jax.grad(f)))(x))
    g = jax.jit(jax.vmap(jax.grad(f)))(x)
    gr = jax.vmap(jax.grad(fr))(x.astype(jnp.float32))
    assert g.dtype == jnp.bfloat16 and rel_err(g, gr) < 5e-2


def test_float32_is_refused_with_a_clear_error():
    # An explicit mode runs the kernels (auto would fall back to XLA's convolutions).
    ops = conv_inputs(8, 1, 7, 7, 64, 64, 64, jnp.float32)
    with pytest.raises(TypeError, match="the CUDA conv pair runs float16 and bfloat16"):
        synced(ops, mode="fused")


def _hopper() -> bool:
    return str(getattr(jax.devices()[0], "compute_capability", "0")).startswith("9")


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,size,c0,c1,c2,f1,f2", [
    (1, 56, 64, 64, 64, 3, 3),      # ResNet's first pair: 25 tiles of 128 pixels, 128x64 tiles
    (2, 13, 128, 128, 128, 3, 3),   # odd size: a tile's 128 pixels span rows and images
    (3, 7, 64, 128, 96, 1, 3),      # 1x1 then 3x3, a consumer narrower than its tile
    (32, 56, 64, 64, 64, 3, 1),     # 784 tiles a conv (128x64 pingpong); 3x3 then 1x1
    (8, 28, 128, 256, 256, 3, 3),   # 128x128 tiles, two column tiles a conv
    (2, 30, 3, 64, 64, 3, 3),       # an RGB input (VGG's first pair): conv 1 runs unfolded
    (1, 13, 5, 128, 64, 1, 3),      # an input of 5 channels, 1x1: padded to one k-block
])
def test_hopper_conv_matches_xla_every_policy_and_mode(n, size, c0, c1, c2, f1, f2, dtype):
    # Kernel family 1: the GEMM-chain kernel with A through TMA's im2col mode
    # (the padding is its zero fill; the consumer waits on its halo's tiles).
    if not _hopper():
        pytest.skip("the Hopper conv runs on compute capability 9.0")
    device = cs.planner.device_model(jax.devices()[0])
    ops = conv_inputs(n + size + c1, n, size, size, c0, c1, c2, dtype, f1=f1, f2=f2, residual=True)
    tile = (128, 64, 64) if c1 == 64 else (128, 128, 64)

    def run(mode, policy):
        plan = cs.plan_conv_pair(n, size, size, c0, c1, c2, filter1=f1, filter2=f2, device=device,
                                 policy=policy if not isinstance(policy, cs.Conv2DTileSync) else "conv2dtilesync",
                                 mode=mode, tile=tile).plan
        assert plan.kernel == 1 and plan.unfold1 == (c0 % 64 != 0)
        return synced(ops, plan=plan)

    check_every_run(ops, run)


HALO_TILE = (128, 64, 576)


def halo_plan(n, h, w, c0, c1, c2, mode, policy, split_k=(1, 1)):
    plan = cs.plan_conv_pair(n, h, w, c0, c1, c2, device=cs.planner.device_model(jax.devices()[0]),
                             policy=policy if not isinstance(policy, cs.Conv2DTileSync) else "conv2dtilesync",
                             mode=mode, tile=HALO_TILE, split_k=split_k).plan
    assert plan.kernel == 2
    return plan


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,h,w,c0,c1,c2", [
    (1, 56, 56, 64, 64, 64),      # ResNet's first pair: B resident, 26 tiles a conv
    (32, 56, 56, 64, 64, 64),     # 832 tiles a conv: persistent CTAs, the ring wraps
    (2, 13, 13, 128, 64, 128),    # B streamed: conv 1 two input blocks, conv 2 two output blocks
    (3, 7, 7, 64, 128, 64),       # one chain a tile (too few images to pair); two output blocks posted apart
    (25, 7, 7, 64, 128, 64),      # paired (two 7x7 images a tile), an odd batch
    (40, 7, 7, 512, 512, 512),    # paired, 160 tiles: pingpong, B streamed over 8 channel blocks
    (8, 28, 28, 128, 128, 128),
    (1, 6, 150, 64, 64, 64),      # the wide tiling: two tiles a row, halos over both
    (1, 56, 56, 64, 128, 64),     # row tiles (two padded rows a tile): two stages where 128 positions fit one
    (2, 57, 57, 128, 64, 128),    # row tiles, odd size, B streamed over two channel blocks
    (1, 5, 150, 64, 128, 64),     # one stage (wide: a 50 KB halo and its streamed 72 KB B): the end records
])
def test_halo_conv_matches_xla_every_policy_and_mode(n, h, w, c0, c1, c2, dtype):
    # Kernel family 2: each tile's input loaded once as a halo, its 9 taps
    # shifted views of it; conv 2's units wait on the conv 1 tiles under it.
    if not _hopper():
        pytest.skip("the halo conv runs on compute capability 9.0")
    x, k1, k2, b1, b2, res = conv_inputs(n + h + w + c1, n, h, w, c0, c1, c2, dtype, residual=True)
    ops = (x, k1, k2, b1, b2, res)
    check_every_run(ops, lambda mode, policy: synced(ops, plan=halo_plan(n, h, w, c0, c1, c2, mode, policy)))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,h,w,c0,c1,c2", [
    (1, 6, 150, 3, 64, 64),       # VGG's RGB pair, wide tiling: B resident, two boxes of conv 1's 72 rows
    (2, 30, 30, 3, 64, 64),       # narrow tiling: a tile's halo starts mid-row (a0 > 0)
    (3, 13, 13, 8, 64, 128),      # 8 channels as given; B streamed (conv 2 two output blocks)
    (1, 7, 7, 1, 64, 64),         # one channel; one chain a tile
    (25, 7, 7, 3, 128, 64),       # paired (two 7x7 images a tile), an odd batch, conv 1 two output blocks
    (4, 56, 56, 5, 64, 64),       # many tiles a CTA: the ring wraps, conv 1's B stays resident
])
def test_halo_conv_reads_an_image_as_8_channel_pixels(n, h, w, c0, c1, c2, dtype):
    # Conv 1 over an image of 8 channels or fewer, padded to 8: a position is
    # one 16-byte row of a K-major core matrix, two taps a k16 step.
    if not _hopper():
        pytest.skip("the halo conv runs on compute capability 9.0")
    ops = conv_inputs(n + h + w + c0, n, h, w, c0, c1, c2, dtype, residual=True)
    assert halo_plan(n, h, w, c0, c1, c2, "fused", "auto").pixel8 == (c0 < 8)  # (8: nothing to pad)
    check_every_run(ops, lambda mode, policy: synced(ops, plan=halo_plan(n, h, w, c0, c1, c2, mode, policy)))


@pytest.mark.parametrize("n,h,w,c0,c1,c2,split", [
    (1, 7, 7, 512, 512, 512, (8, 8)),    # ResNet's last pair at batch 1: 64 shares of one unit a conv
    (2, 14, 14, 256, 128, 256, (4, 2)),  # shares of 1 and of 2 units, output blocks 2 and 4
    (3, 28, 28, 128, 128, 64, (2, 1)),   # conv 1 split, conv 2 whole
])
def test_halo_conv_split_matches_xla_and_repeats_exactly(n, h, w, c0, c1, c2, split):
    # Split along its input channel blocks, a tile's shares store fp32 sums
    # and the last to count adds them in share order: every mode and policy
    # gives the same bits, and conv 2 waits for the last share's post.
    if not _hopper():
        pytest.skip("the halo conv runs on compute capability 9.0")
    ops = conv_inputs(n + h + sum(split), n, h, w, c0, c1, c2, jnp.float16, residual=True)
    check_every_run(ops, lambda mode, policy: synced(ops, plan=halo_plan(n, h, w, c0, c1, c2, mode, policy, split)))


@pytest.mark.parametrize("n,h,w,c,split", [(1, 56, 56, 64, (1, 1)), (32, 56, 56, 64, (1, 1)),
                                           (1, 7, 7, 512, (8, 8)), (8, 28, 28, 128, (1, 1))])
def test_halo_conv_applies_the_blocks_last_relu_after_the_residual(n, h, w, c, split):
    # ResNet's block, relu(conv2(...) + b2 + x), with the ReLU in conv 2's
    # epilogue: what XLA computes, and bit for bit the unfused op's ReLU of
    # the same kernel's output (ReLU commutes with rounding).
    if not _hopper():
        pytest.skip("the halo conv runs on compute capability 9.0")
    x, k1, k2, b1, b2, res = ops = conv_inputs(n + h + c, n, h, w, c, c, c, jnp.float16, residual=True)
    want = cs.conv_pair_reference(x, k1, k2, b1=b1, b2=b2, residual=res, out_activation="relu")
    for mode in ("serial", "fused"):
        plan = halo_plan(n, h, w, c, c, c, mode, cs.Conv2DTileSync(3, 3), split if mode == "serial" else (1, 1))
        y = synced(ops, plan=plan, out_activation="relu")
        assert rel_err(y, want) < TOL[jnp.float16], mode
        assert float(jnp.mean(y == 0)) > 0.2, mode
        assert np.array_equal(np.asarray(y), np.asarray(jax.nn.relu(synced(ops, plan=plan)))), mode


@pytest.mark.parametrize("mode", ["fused", "streams"])
def test_halo_conv_waits_for_what_it_reads(mode):
    # Two input sets in alternation, each call against its own reference: a
    # consumer unit that read h before its conv 1 tiles were stored would see
    # the other set's h (the buffer XLA hands the next call) and fail.
    n, h, w, c = 16, 56, 56, 64
    sets = [conv_inputs(seed, n, h, w, c, c, c, jnp.float16, residual=True) for seed in (1, 2)]
    wants = [reference(ops) for ops in sets]
    plan = halo_plan(n, h, w, c, c, c, mode, cs.Conv2DTileSync(3, 3))
    fn = jax.jit(lambda *a: cs.synced_conv_pair(*a[:3], b1=a[3], b2=a[4], residual=a[5], plan=plan))
    for i in range(20):
        assert rel_err(fn(*sets[i % 2]), wants[i % 2]) < TOL[jnp.float16], i


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("n,size,c0,c1,c2,f1,f2,split", [
    (1, 7, 512, 512, 512, 3, 3, (12, 8)),   # ResNet's last pair at batch 1: 4 tiles a conv, 72 k-blocks
    (2, 13, 256, 256, 256, 3, 3, (5, 1)),   # 5 shares of 36 k-blocks: ranges straddle tiles
    (1, 14, 64, 64, 128, 1, 3, (1, 3)),     # 128x64 tiles (pingpong), only the consumer split
])
def test_hopper_conv_split_k_matches_xla_and_repeats_exactly(n, size, c0, c1, c2, f1, f2, split, dtype):
    # Serial mode splits a conv stream-K: the range that finishes a tile last
    # adds the others' fp32 sums in range order, so a run repeats bit for bit.
    if not _hopper():
        pytest.skip("the Hopper conv runs on compute capability 9.0")
    ops = conv_inputs(n + size + sum(split), n, size, size, c0, c1, c2, dtype, f1=f1, f2=f2, residual=True)
    tile = (128, 64, 64) if c1 == 64 else (128, 128, 64)
    plan = cs.plan_conv_pair(n, size, size, c0, c1, c2, filter1=f1, filter2=f2,
                             device=cs.planner.device_model(jax.devices()[0]), mode="serial", tile=tile,
                             split_k=split).plan
    assert plan.kernel == 1 and plan.split_k == split
    y = synced(ops, plan=plan)
    assert rel_err(y, reference(ops)) < TOL[dtype]
    for _ in range(3):
        assert np.array_equal(np.asarray(synced(ops, plan=plan)), np.asarray(y))


@pytest.mark.parametrize("n,size,c", [(1, 56, 64), (8, 56, 64), (32, 56, 64), (1, 28, 128), (1, 14, 256),
                                      (1, 7, 512)])
def test_auto_runs_what_the_tuned_table_measured(n, size, c):
    # Where cusync_jax/tuned/h200-conv-residual.json names one of our kernels
    # for a ResNet block on this GPU (the halo conv, kernel 2, e.g. 7x7x512 at
    # batch 1 split along its channel blocks), auto plans and runs it.
    device = cs.planner.device_model(jax.devices()[0])
    rep = cs.plan_conv_pair(n, size, size, c, c, device=device, dtype=jnp.float16, residual=True)
    if rep.source != "measured" or rep.fallback:
        pytest.skip(f"no measured synced winner for this pair on {device.name}")
    assert rep.plan.kernel in (1, 2)
    ops = conv_inputs(n + size, n, size, size, c, c, c, jnp.float16, residual=True)
    x, k1, k2, b1, b2, res = ops
    y = jax.jit(lambda *a: cs.synced_conv_pair(*a[:3], b1=a[3], b2=a[4], residual=a[5]))(x, k1, k2, b1, b2, res)
    assert rel_err(y, reference(ops)) < TOL[jnp.float16]
    assert np.array_equal(np.asarray(y), np.asarray(synced(ops, plan=rep.plan)))
