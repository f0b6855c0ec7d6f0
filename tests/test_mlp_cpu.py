"""synced_mlp on the CPU tile executor against a float32 jnp reference."""
import dataclasses

import jax
import jax.numpy as jnp
import pytest

import cusync_jax as cs
from helpers import TOL, mlp_inputs, rel_err

DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16]
ACTIVATIONS = ["gelu", "gelu_tanh", "relu", "silu", "identity", "swiglu"]


def policies_for(activation):
    pols = [cs.TileSync(), cs.RowSync()]
    if activation == "swiglu":
        pols.append(cs.StridedSync(2))
    return pols


CASES = [(a, p, d) for a in ACTIVATIONS for p in policies_for(a) for d in DTYPES]


@pytest.mark.parametrize("activation,policy,dtype", CASES,
                         ids=[f"{a}-{type(p).__name__}-{jnp.dtype(d).name}" for a, p, d in CASES])
@pytest.mark.parametrize("tokens", [1, 17, 1000])
def test_numerics_every_policy_activation_dtype(activation, policy, dtype, tokens):
    # K = 40 and N = 56 are odd multiples of 8; the 16x24 tiles leave ragged
    # edge tiles in every dimension.
    hidden, ffn, out = 40, 56, 24
    x, w1, w2, b1, b2 = mlp_inputs(tokens * 7 + len(activation), tokens, hidden, ffn, out, dtype,
                                   swiglu=activation == "swiglu")
    f = jax.jit(lambda *a: cs.synced_mlp(*a[:3], b1=a[3], b2=a[4], activation=activation,
                                         policy=policy, tile=(16, 24, 16)))
    y = f(x, w1, w2, b1, b2)
    assert y.dtype == dtype and y.shape == (tokens, out)
    ref = cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation)
    assert rel_err(y, ref) < TOL[dtype]


@pytest.mark.parametrize("mode", ["fused", "streams", "serial"])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_modes_and_thread_counts(mode, threads):
    x, w1, w2, b1, b2 = mlp_inputs(3, 70, 48, 72, 40, jnp.float32)
    y = cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, mode=mode, tile=(16, 16, 8),
                      cpu=cs.CpuOptions(threads=threads))
    ref = cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)
    assert rel_err(y, ref) < TOL[jnp.float32]


@pytest.mark.parametrize("opts", [
    cs.Optimizations(),
    cs.Optimizations(False, False, False, False),
    cs.Optimizations(hardware_block_order=True),
    cs.Optimizations(release_store_posts=False),
])
@pytest.mark.parametrize("policy", [cs.TileSync(), cs.RowSync()])
def test_optimizations(opts, policy):
    x, w1, w2, b1, b2 = mlp_inputs(4, 50, 32, 64, 32, jnp.float32)
    y = cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, policy=policy, optimizations=opts, tile=(16, 16, 16))
    assert rel_err(y, cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]


@pytest.mark.parametrize("order,band", [("row_major", 8), ("column_major", 8), ("grouped", 8),
                                        ("grouped", 3), ("grouped", 1)])
@pytest.mark.parametrize("policy", ["tilesync", "rowsync"])
def test_tile_orders(order, band, policy):
    # 200 tokens in 16-row tiles: 13 tile rows, so "grouped" has a ragged band.
    x, w1, w2, b1, b2 = mlp_inputs(5, 200, 32, 48, 32, jnp.float32)
    plan = cs.plan_mlp(200, 32, 48, 32, device="cpu", tile=(16, 16, 16), order=order,
                       group_rows=band, policy=policy, cpu=cs.CpuOptions(delay_us=20, seed=3)).plan
    assert plan.group_rows == band
    y = cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, plan=plan)
    assert rel_err(y, cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]


def test_default_tiles_and_no_bias():
    x, w1, w2, _, _ = mlp_inputs(6, 200, 64, 128, 96, jnp.bfloat16, bias=False)
    y = cs.synced_mlp(x, w1, w2)
    assert rel_err(y, cs.mlp_reference(x, w1, w2)) < TOL[jnp.bfloat16]


def test_leading_dims_fold_into_tokens():
    x, w1, w2, b1, b2 = mlp_inputs(7, 5, 32, 48, 16, jnp.float32, lead=(2, 3))
    y = cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, tile=(8, 16, 16))
    assert y.shape == (2, 3, 5, 16)
    assert rel_err(y, cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]


def test_single_token_vector_and_empty_batch():
    x, w1, w2, b1, b2 = mlp_inputs(8, 1, 32, 48, 16, jnp.float32)
    y = cs.synced_mlp(x[0], w1, w2, b1=b1, b2=b2)
    assert y.shape == (16,)
    assert rel_err(y, cs.mlp_reference(x[0], w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]
    empty = cs.synced_mlp(jnp.zeros((0, 32)), w1, w2)
    assert empty.shape == (0, 16)


def test_vmap_shared_weights_folds_and_per_example_weights_loop():
    x, w1, w2, b1, b2 = mlp_inputs(9, 12, 32, 48, 16, jnp.float32, lead=(4,))
    f = lambda x_, w1_: cs.synced_mlp(x_, w1_, w2, b1=b1, b2=b2, tile=(8, 16, 16))
    y = jax.vmap(f, in_axes=(0, None))(x, w1)
    assert rel_err(y, cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]
    w1s = jnp.stack([w1 * s for s in (1.0, 0.5, -1.0, 2.0)])
    y2 = jax.jit(jax.vmap(f))(x, w1s)
    ref2 = jax.vmap(lambda a, b: cs.mlp_reference(a, b, w2, b1=b1, b2=b2))(x, w1s)
    assert rel_err(y2, ref2) < TOL[jnp.float32]


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_grad_matches_jnp(activation):
    x, w1, w2, b1, b2 = mlp_inputs(10, 24, 16, 24, 8, jnp.float32, swiglu=activation == "swiglu")

    def loss(fn, *args):
        y = fn(*args)
        return jnp.sum(jnp.sin(y))  # a non-trivial cotangent

    synced = lambda x, w1, w2, b1, b2: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, activation=activation,
                                                     tile=(8, 8, 8))
    ref = lambda x, w1, w2, b1, b2: cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation)
    g = jax.jit(jax.grad(lambda *a: loss(synced, *a), argnums=(0, 1, 2, 3, 4)))(x, w1, w2, b1, b2)
    gr = jax.grad(lambda *a: loss(ref, *a), argnums=(0, 1, 2, 3, 4))(x, w1, w2, b1, b2)
    for name, a, b in zip(["x", "w1", "w2", "b1", "b2"], g, gr):
        assert rel_err(a, b) < 1e-4, name


def test_grad_bf16_and_under_vmap():
    x, w1, w2, b1, b2 = mlp_inputs(11, 16, 16, 32, 8, jnp.bfloat16, lead=(3,))
    f = lambda x_: jnp.sum(cs.synced_mlp(x_, w1, w2, b1=b1, b2=b2).astype(jnp.float32) ** 2)
    fr = lambda x_: jnp.sum(cs.mlp_reference(x_, w1, w2, b1=b1, b2=b2) ** 2)
    g = jax.vmap(jax.grad(f))(x)
    gr = jax.vmap(jax.grad(fr))(x.astype(jnp.float32))
    assert g.dtype == jnp.bfloat16
    assert rel_err(g, gr) < 5e-2


def test_plan_is_reused_and_jit_caches():
    x, w1, w2, _, _ = mlp_inputs(12, 32, 16, 16, 16, jnp.float32)
    plan = cs.plan_mlp(32, 16, 16, device="cpu", policy="rowsync", mode="streams").plan
    assert plan.policy == cs.RowSync() and plan.mode == "streams"
    f = jax.jit(lambda x: cs.synced_mlp(x, w1, w2, plan=plan))
    assert rel_err(f(x), cs.mlp_reference(x, w1, w2)) < TOL[jnp.float32]
    assert rel_err(f(x * 2), cs.mlp_reference(x * 2, w1, w2)) < TOL[jnp.float32]


def test_y_may_take_x_buffer_only_where_shape_and_dtype_match():
    # Same shape and dtype: the call offers x's buffer to y (XLA copies x
    # first where x is still needed); out != hidden: no offer.
    x, w1, w2, _, _ = mlp_inputs(21, 40, 64, 96, 64, jnp.float32)
    text = jax.jit(lambda x, w1, w2: cs.synced_mlp(x, w1, w2)).lower(x, w1, w2).as_text()
    assert "output_operand_alias" in text
    x, w1, w2, _, _ = mlp_inputs(21, 40, 64, 96, 32, jnp.float32)
    text = jax.jit(lambda x, w1, w2: cs.synced_mlp(x, w1, w2)).lower(x, w1, w2).as_text()
    assert "output_operand_alias" not in text


@pytest.mark.parametrize("mode", ["serial", "streams", "fused"])
def test_chained_in_a_loop_and_x_still_needed_after_the_call(mode):
    x, w1, w2, b1, b2 = mlp_inputs(22, 70, 64, 96, 64, jnp.float32)
    step = lambda v: cs.synced_mlp(v, w1, w2, b1=b1, b2=b2, tile=(16, 32, 32), mode=mode)
    ref = lambda v: cs.mlp_reference(v, w1, w2, b1=b1, b2=b2)
    got = jax.jit(lambda v: jax.lax.fori_loop(0, 3, lambda _, u: step(u), v))(x)
    want = ref(ref(ref(x)))
    assert rel_err(got, want) < TOL[jnp.float32]
    # A residual: x is read after the call that may take its buffer.
    got = jax.jit(lambda v: step(v) + v)(x)
    assert rel_err(got, ref(x) + x) < TOL[jnp.float32]


def test_stream_k_plan_sizes_its_buffer_and_runs_the_same_math_on_cpu():
    # A stream-K plan (made for the H200) adds counts and partial sums to the
    # sync buffer, sized by the C++ layout; the CPU executor ignores it.
    from cusync_jax import _backend, _cusync_cpu
    x, w1, w2, b1, b2 = mlp_inputs(23, 300, 256, 512, 128, jnp.float32)
    plan = cs.plan_mlp(300, 256, 512, 128, device="h200", mode="serial", tile=(128, 128, 64),
                       stream_k=True).plan
    plain = dataclasses.replace(plan, stream_k=(False, False), stream_k_ctas=0)
    words = _backend.mlp_sync_words(300, 256, 512, 128, 1, plan)
    segments = (_cusync_cpu.stream_k_schedule(3, 4, 4, 132)[0], _cusync_cpu.stream_k_schedule(3, 1, 8, 132)[0])
    base = _backend.mlp_sync_words(300, 256, 512, 128, 1, plain)
    assert base == _backend.SYNC_HEADER_WORDS + 3 * 4
    counts_end = base + 3 * 4 + 3 * 1
    assert words == -(-counts_end // 4) * 4 + segments[0] * 12 * 128 * 128 + segments[1] * 3 * 128 * 128
    y = cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, plan=plan)
    assert rel_err(y, cs.mlp_reference(x, w1, w2, b1=b1, b2=b2)) < TOL[jnp.float32]
    # SwiGLU, ffn 520: the Hopper kernel's producer has ceil(520 / 64) = 9
    # columns of half-width tiles where [gate | up] has 2 x 5 = 10; the
    # partial-sum slots follow the kernel's 9.
    plan = cs.plan_mlp(300, 256, 520, 128, activation="swiglu", device="h200", mode="serial",
                       tile=(128, 128, 64), stream_k=(True, False)).plan
    words = _backend.mlp_sync_words(300, 256, 520, 128, 2, plan)
    counts_end = _backend.SYNC_HEADER_WORDS + 3 * 10 + 3 * 10 + 3 * 1
    assert words == (-(-counts_end // 4) * 4
                     + _cusync_cpu.stream_k_schedule(3, 9, 4, 132)[0] * 30 * 128 * 128)  # none for the consumer
