"""Tensor-parallel cases, run by test_parallel.py in a child process whose
XLA_FLAGS give the CPU 8 devices (the flag must be set before jax starts, so
these cannot share the test process). ``python tests/tp_cases.py`` prints one
JSON object: case name -> "ok" or the failure's traceback:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/tp_cases.py [case ...]

Importing this module (for CASES) starts nothing."""
import json
import sys
import time
import traceback

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import cusync_jax as cs
from helpers import mlp_inputs, rel_err

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _mesh(shape, names, axis_type=AxisType.Auto):
    return jax.make_mesh(shape, names, axis_types=(axis_type,) * len(shape))


def _close(got, want, tol=2e-5):
    err = rel_err(got, want)
    assert err < tol, f"relative error {err:.3g} >= {tol}"


def _reference(x, w1, w2, b1, b2, activation):
    return cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation)


@case
def forward_gelu_model8():
    mesh = _mesh((8,), ("model",))
    x, w1, w2, b1, b2 = mlp_inputs(0, 24, 64, 256, 48, jnp.float32, lead=(2,))
    y = jax.jit(lambda *a: cs.tp_synced_mlp(*a[:3], b1=a[3], b2=a[4], mesh=mesh))(
        x, w1, w2, b1, b2)
    assert y.shape == (2, 24, 48), y.shape
    _close(y, _reference(x, w1, w2, b1, b2, "gelu"))
    _close(y, cs.synced_mlp(x, w1, w2, b1=b1, b2=b2))


@case
def forward_swiglu_gate_up_split():
    mesh = _mesh((8,), ("model",))
    ffn, hidden = 128, 64
    x, w1, w2, b1, b2 = mlp_inputs(1, 32, hidden, ffn, hidden, jnp.float32, swiglu=True)
    want = _reference(x, w1, w2, b1, b2, "swiglu")
    tp = lambda w: cs.tp_synced_mlp(x, w, w2, b1=b1, b2=b2, mesh=mesh,  # noqa: E731
                                    activation="swiglu")
    _close(tp(w1), want)
    # The [hidden, 2, ffn] view, placed so each device holds gate_i and up_i.
    view = jax.device_put(w1.reshape(hidden, 2, ffn), NamedSharding(mesh, P(None, None, "model")))
    _close(jax.jit(tp)(view), want)


@case
def forward_data_and_model_axes():
    mesh = _mesh((2, 4), ("data", "model"))
    x, w1, w2, b1, b2 = mlp_inputs(2, 16, 32, 128, 32, jnp.float32, lead=(4,))
    y = cs.tp_synced_mlp(x, w1, w2, b1=b1, b2=b2, mesh=mesh, batch_axis="data",
                         activation="relu", policy="rowsync")
    _close(y, _reference(x, w1, w2, b1, b2, "relu"))


@case
def grads_match_unsharded_jnp():
    mesh = _mesh((8,), ("model",))
    for activation, swiglu in (("gelu", False), ("swiglu", True)):
        args = mlp_inputs(3, 16, 32, 64, 32, jnp.float32, swiglu=swiglu)

        def loss_tp(x, w1, w2, b1, b2):
            y = cs.tp_synced_mlp(x, w1, w2, b1=b1, b2=b2, mesh=mesh, activation=activation)
            return jnp.sum(jnp.sin(y))

        def loss_ref(x, w1, w2, b1, b2):
            return jnp.sum(jnp.sin(_reference(x, w1, w2, b1, b2, activation)))

        got = jax.jit(jax.grad(loss_tp, argnums=range(5)))(*args)
        want = jax.grad(loss_ref, argnums=range(5))(*args)
        for name, g, r in zip(("x", "w1", "w2", "b1", "b2"), got, want):
            try:
                _close(g, r, 5e-5)
            except AssertionError as e:
                raise AssertionError(f"{activation} d{name}: {e}") from None


@case
def jit_with_sharded_inputs_uses_them_in_place():
    mesh = _mesh((8,), ("model",))
    x, w1, w2, b1, b2 = mlp_inputs(4, 32, 64, 256, 64, jnp.float32)
    put = lambda a, spec: jax.device_put(a, NamedSharding(mesh, spec))  # noqa: E731
    placed = (put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None)),
              put(b1, P("model")), put(b2, P()))
    f = jax.jit(lambda x, w1, w2, b1, b2: cs.tp_synced_mlp(x, w1, w2, b1=b1, b2=b2, mesh=mesh))
    hlo = f.lower(*placed).compile().as_text()
    # Megatron layout: one all-reduce, no gathering of the weights.
    assert "all-reduce" in hlo, "expected the psum's all-reduce"
    assert "all-gather" not in hlo and "all-to-all" not in hlo, "weights were resharded"
    y = f(*placed)
    _close(y, _reference(x, w1, w2, b1, b2, "gelu"))
    assert y.sharding.is_fully_replicated


@case
def explicit_mesh_axes():
    mesh = _mesh((8,), ("model",), AxisType.Explicit)
    x, w1, w2, b1, b2 = mlp_inputs(5, 16, 32, 64, 32, jnp.float32)
    put = lambda a, spec: jax.device_put(a, NamedSharding(mesh, spec))  # noqa: E731
    y = jax.jit(lambda *a: cs.tp_synced_mlp(*a[:3], b1=a[3], b2=a[4], mesh=mesh))(
        put(x, P()), put(w1, P(None, "model")), put(w2, P("model", None)), put(b1, P("model")),
        put(b2, P()))
    _close(y, _reference(x, w1, w2, b1, b2, "gelu"))


@case
def plain_synced_mlp_on_sharded_operands_is_correct():
    # Without the helper XLA gathers the operands; the result must not change.
    mesh = _mesh((8,), ("model",))
    x, w1, w2, b1, b2 = mlp_inputs(6, 32, 64, 128, 64, jnp.float32)
    w1s = jax.device_put(w1, NamedSharding(mesh, P(None, "model")))
    w2s = jax.device_put(w2, NamedSharding(mesh, P("model", None)))
    y = jax.jit(lambda w1, w2: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2))(w1s, w2s)
    _close(y, _reference(x, w1, w2, b1, b2, "gelu"))


@case
def errors_name_the_argument():
    mesh = _mesh((8,), ("model",))
    x, w1, w2, _, _ = mlp_inputs(7, 8, 16, 64, 16, jnp.float32)
    _, w1_odd, w2_odd, _, _ = mlp_inputs(7, 8, 16, 36, 16, jnp.float32)
    for weights, kwargs, expected in (
            ((w1_odd, w2_odd), dict(mesh=mesh), "w1: ffn width 36"),
            ((w1, w2), dict(mesh=mesh, axis="tp"), "axis: 'tp'"),
            ((w1, w2), dict(mesh=mesh, batch_axis="data"), "batch_axis: 'data'"),
            ((w1, w2), dict(mesh="model"), "mesh: expected")):
        try:
            cs.tp_synced_mlp(x, *weights, **kwargs)
        except (ValueError, TypeError) as e:
            assert expected in str(e), f"{expected!r} not in {e}"
        else:
            raise AssertionError(f"no error for {kwargs}")


@case
def shard_map_outputs_vary_over_the_sharded_axis():
    # Under a plain shard_map (check_vma on) the op's outputs vary over the
    # axes its inputs vary over, as jnp's do: a replicated out_specs is
    # refused, not answered with one shard's rows.
    mesh = _mesh((8,), ("d",))
    x, w1, w2, b1, b2 = mlp_inputs(2, 32, 16, 64, 16, jnp.float32)
    for op in (cs.synced_mlp, cs.mlp_reference):
        f = jax.shard_map(lambda x: op(x, w1, w2, b1=b1, b2=b2), mesh=mesh, in_specs=P("d"), out_specs=P())
        try:
            f(x)
        except ValueError as e:
            assert "replication" in str(e), str(e)
        else:
            raise AssertionError(f"{op.__name__}: out_specs=P() of a sharded result was accepted")
    f = jax.shard_map(lambda x: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2), mesh=mesh, in_specs=P("d"),
                      out_specs=P("d"))
    _close(f(x), _reference(x, w1, w2, b1, b2, "gelu"))


@case
def shard_map_megatron_grads_with_checks_on():
    # Megatron's split by hand under shard_map's default checks: w1 by
    # columns, w2 by rows, a psum after; the replicated x's gradient is the
    # sum over the shards.
    mesh = _mesh((8,), ("model",))
    x, w1, w2, b1, b2 = mlp_inputs(3, 24, 32, 128, 32, jnp.float32)
    tp = jax.shard_map(lambda x, w1, b1, w2: jax.lax.psum(cs.synced_mlp(x, w1, w2, b1=b1), "model"),
                       mesh=mesh, in_specs=(P(), P(None, "model"), P("model"), P("model", None)),
                       out_specs=P())
    loss = lambda f: lambda x, w1, b1, w2: (f(x, w1, b1, w2) ** 2).sum()  # noqa: E731
    plain = lambda x, w1, b1, w2: cs.mlp_reference(x, w1, w2, b1=b1)  # noqa: E731
    _close(tp(x, w1, b1, w2), plain(x, w1, b1, w2))
    got = jax.grad(loss(tp), argnums=(0, 1, 2, 3))(x, w1, b1, w2)
    want = jax.grad(loss(plain), argnums=(0, 1, 2, 3))(x, w1, b1, w2)
    for g, r in zip(got, want):
        _close(g, r, 1e-4)


@case
def shard_map_conv_pair_grads():
    mesh = _mesh((8,), ("d",))
    ks = jax.random.split(jax.random.key(4), 3)
    x = jax.random.normal(ks[0], (8, 5, 5, 4), jnp.float32)
    k1 = jax.random.normal(ks[1], (3, 3, 4, 8), jnp.float32) * 0.2
    k2 = jax.random.normal(ks[2], (3, 3, 8, 4), jnp.float32) * 0.2
    f = jax.shard_map(lambda x, k1: cs.synced_conv_pair(x, k1, k2), mesh=mesh, in_specs=(P("d"), P()),
                      out_specs=P("d"))
    loss = lambda g: lambda x, k1: (g(x, k1) ** 2).sum()  # noqa: E731
    plain = lambda x, k1: cs.conv_pair_reference(x, k1, k2)  # noqa: E731
    _close(f(x, k1), plain(x, k1))
    for g, r in zip(jax.grad(loss(f), argnums=(0, 1))(x, k1), jax.grad(loss(plain), argnums=(0, 1))(x, k1)):
        _close(g, r, 1e-4)


def main(names):
    if len(jax.devices()) != 8:
        sys.exit(f"expected 8 devices, got {jax.devices()}: set XLA_FLAGS="
                 "--xla_force_host_platform_device_count=8 and JAX_PLATFORMS=cpu")
    results = {}
    for name in names or CASES:
        start = time.perf_counter()
        try:
            CASES[name]()
            results[name] = "ok"
        except Exception:  # reported to the parent test, which fails with it
            results[name] = traceback.format_exc()
        print(f"{name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
