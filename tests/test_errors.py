"""Bad input raises ValueError/TypeError naming the argument and the shapes."""
import jax
import jax.numpy as jnp
import pytest

import cusync_jax as cs

x = jnp.ones((8, 16))
w1 = jnp.ones((16, 32))
w2 = jnp.ones((32, 12))


@pytest.mark.parametrize("args,kwargs,exc,pattern", [
    ((jnp.float32(1.0), w1, w2), {}, ValueError, r"x: .*scalar"),
    ((x, jnp.ones((16,)), w2), {}, ValueError, r"w1: expected shape \[hidden, ffn\], got shape \(16,\)"),
    ((x, w1, jnp.ones((32, 12, 1))), {}, ValueError, r"w2: expected shape \[ffn, out\], got shape \(32, 12, 1\)"),
    ((x, jnp.ones((15, 32)), w2), {}, ValueError, r"w1: expected shape \[16, ffn\].*\(8, 16\).*\(15, 32\)"),
    ((x, w1, jnp.ones((31, 12))), {}, ValueError, r"w2: expected shape \[32, out\].*\(31, 12\)"),
    ((x, w1, w2), {"b1": jnp.ones((31,))}, ValueError, r"b1: expected shape \(32,\), got shape \(31,\)"),
    ((x, w1, w2), {"b2": jnp.ones((12, 1))}, ValueError, r"b2: expected shape \(12,\), got shape \(12, 1\)"),
    ((x.astype(jnp.float16), w1, w2), {}, TypeError, r"w1: dtype float32 does not match x's dtype float16"),
    ((x, w1, w2), {"b1": jnp.ones((32,), jnp.bfloat16)}, TypeError, r"b1: dtype bfloat16"),
    ((x.astype(jnp.int32), w1.astype(jnp.int32), w2.astype(jnp.int32)), {}, TypeError, r"x: expected float32"),
    ((x, w1, w2), {"activation": "tanh"}, ValueError, r"activation: expected one of"),
    ((x, w1, w2), {"policy": "fastest"}, ValueError, r"policy: expected 'auto'"),
    ((x, w1, w2), {"policy": cs.StridedSync(2)}, ValueError, r"policy: StridedSync\(2\) needs"),
    ((x, w1, w2), {"mode": "parallel"}, ValueError, r"mode: expected 'auto' or one of"),
    ((x, w1, w2), {"tile": (16, 0)}, ValueError, r"tile: n must be a positive int"),
    ((x, w1, w2), {"tile": "big"}, ValueError, r"tile: expected"),
    ((x, jnp.ones((16, 33)), jnp.ones((16, 12))), {"activation": "swiglu"}, ValueError,
     r"w1: activation 'swiglu' needs \[gate \| up\] columns, an even width, got shape \(16, 33\)"),
    ((x, w1, w2), {"activation": "swiglu"}, ValueError, r"w2: expected shape \[16, out\] \(w1 holds \[gate \| up\]"),
    ((x, w1, w2), {"plan": "fast"}, TypeError, r"plan: expected an MlpPlan"),
    ((x, w1, w2), {"policy": cs.Conv2DTileSync()}, ValueError, r"policy: Conv2DTileSync is the conv pair's"),
    ((x, w1, w2), {"optimizations": "x"}, TypeError, r"optimizations: expected an Optimizations, got str"),
    ((x, w1, w2), {"cpu": {"threads": 2}}, TypeError, r"cpu: expected a CpuOptions, got dict"),
])
def test_bad_input(args, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern):
        cs.synced_mlp(*args, **kwargs)


def test_strided_sync_slices_validated():
    with pytest.raises(ValueError, match="StridedSync: slices must be a positive int"):
        cs.StridedSync(0)


def test_plan_mlp_bad_arguments():
    with pytest.raises(ValueError, match="tokens: expected a positive int"):
        cs.plan_mlp(-1, 16, 16)
    with pytest.raises(ValueError, match="device: expected 'cpu'"):
        cs.plan_mlp(16, 16, 16, device="tpu9")


def test_cpu_options_validated():
    for field, bad in (("threads", -1), ("delay_us", -5), ("wait_timeout_ms", 0), ("seed", 1.5)):
        with pytest.raises(ValueError, match=f"CpuOptions.{field}: expected"):
            cs.CpuOptions(**{field: bad})


def test_gpu_plans_need_rows_of_16_bytes():
    # Both CUDA kernel families copy 16-byte rows: an automatic plan runs
    # XLA's ops for other shapes, an explicit one is refused before it runs.
    h200 = cs.DeviceModel("NVIDIA H200", 132, arch=90)
    rep = cs.plan_mlp(2049, 12290, 1027, device=h200, dtype=jnp.float16)
    assert rep.fallback and rep.source == "unaligned"
    with pytest.raises(ValueError, match=r"hidden, ffn and out multiples of 8.*hidden 60, ffn 1024, out 60"):
        cs.plan_mlp(2048, 60, 1024, device=h200, dtype=jnp.float16, policy="rowsync")
    assert not cs.plan_mlp(64, 60, 64, device="cpu").fallback  # the CPU executor takes any shape


def test_gemm_refuses_bad_arguments():
    from cusync_jax.gemm import gemm
    a = jnp.zeros((16, 64), jnp.float16)
    with pytest.raises(ValueError, match="order: expected one of"):
        gemm(a, jnp.zeros((64, 64), jnp.float16), order="diagonal")
    with pytest.raises(ValueError, match="tile_n: expected one of"):
        gemm(a, jnp.zeros((64, 64), jnp.float16), tile_n=64)
    with pytest.raises(TypeError, match="float16 or bfloat16"):
        gemm(a.astype(jnp.float32), jnp.zeros((64, 64), jnp.float32))
    with pytest.raises(ValueError, match="group_rows: expected a positive int"):
        gemm(a, jnp.zeros((64, 64), jnp.float16), group_rows=True)
    if jax.default_backend() == "cpu":
        with pytest.raises(RuntimeError, match="gemm: runs the Hopper kernel on a CUDA GPU only"):
            gemm(a, jnp.zeros((64, 64), jnp.float16))
