"""synced_mlp: y = act(x @ w1 + b1) @ w2 + b2 as one JAX primitive whose
producer (first GEMM) and consumer (second GEMM) tiles synchronize through
cuSync semaphores instead of a kernel boundary."""
from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core
from jax.interpreters import batching, mlir

from . import _backend, kernels
from ._op_common import (check_float_dtypes, check_mode, cuda_dtype_check, default_device, ffi_lowering,
                         jvp_of, no_tangent, out_aval, shape_of, vary_together)
from .activations import ACTIVATIONS, activation_slices, apply_activation, check_activation
from .planner import CpuOptions, MlpPlan, plan_mlp
from .policies import Optimizations, StridedSync, parse_policy

synced_mlp_p = jex_core.Primitive("cusync_synced_mlp")
synced_mlp_p.multiple_results = True


# ---------------------------------------------------------------- validation
_shape = shape_of


def _validate(x, w1, w2, b1, b2, activation):
    activation = check_activation(activation)
    slices = activation_slices(activation)
    if np.ndim(x) < 1:
        raise ValueError(f"x: expected shape [..., hidden], got a scalar of shape {_shape(x)}")
    if np.ndim(w1) != 2:
        raise ValueError(f"w1: expected shape [hidden, ffn], got shape {_shape(w1)}")
    if np.ndim(w2) != 2:
        raise ValueError(f"w2: expected shape [ffn, out], got shape {_shape(w2)}")
    hidden = _shape(x)[-1]
    if _shape(w1)[0] != hidden:
        raise ValueError(f"w1: expected shape [{hidden}, ffn] to match x's last dimension "
                         f"(x shape {_shape(x)}), got shape {_shape(w1)}")
    width = _shape(w1)[1]
    if width % slices:
        raise ValueError(f"w1: activation {activation!r} needs [gate | up] columns, an even "
                         f"width, got shape {_shape(w1)}")
    ffn = width // slices
    if _shape(w2)[0] != ffn:
        expected = f"[{ffn}, out]" + (f" (w1 holds [gate | up] of {ffn} each)" if slices > 1 else "")
        raise ValueError(f"w2: expected shape {expected} to match w1 {_shape(w1)}, "
                         f"got shape {_shape(w2)}")
    out = _shape(w2)[1]
    if b1 is not None and _shape(b1) != (width,):
        raise ValueError(f"b1: expected shape ({width},), got shape {_shape(b1)}")
    if b2 is not None and _shape(b2) != (out,):
        raise ValueError(f"b2: expected shape ({out},), got shape {_shape(b2)}")
    dtype = check_float_dtypes(("x", x), ("w1", w1), ("w2", w2), ("b1", b1), ("b2", b2))
    return activation, hidden, ffn, out, dtype


# ------------------------------------------------------------- the primitive
def _abstract_eval(x, w1, b1, w2, b2, *, plan: MlpPlan, activation: str):
    # Outputs: y; the intermediate h, which only the VJP of relu and identity
    # reads back (for SwiGLU the Hopper kernels store silu(gate) * up packed
    # in its first tokens * ffn elements: its layout is the backend's); the
    # per-call semaphores.
    tokens, _ = x.shape
    slices = activation_slices(activation)
    ffn = w1.shape[1] // slices
    words = _backend.mlp_sync_words(tokens, x.shape[1], ffn, w2.shape[1], slices, plan)
    ins = (x, w1, b1, w2, b2)
    return (out_aval((tokens, w2.shape[1]), x.dtype, *ins),
            out_aval((tokens, w1.shape[1]), x.dtype, *ins),
            out_aval((words,), jnp.int32, *ins))


synced_mlp_p.def_abstract_eval(_abstract_eval)


def _lowering(ctx, *args, plan: MlpPlan, activation: str):
    # y may take x's buffer (same shape and dtype): every reader of x's rows R
    # is a producer tile of rows R, and every backend writes y's rows R only
    # after all of h's rows R (so every such producer tile) is complete; the
    # CPU backend reads x into floats first. XLA copies x first where x is
    # still needed, and otherwise saves the copy a loop carry (y feeding the
    # next x, as in a scan over layers) would need.
    x_aval, y_aval = ctx.avals_in[0], ctx.avals_out[0]
    aliases = {0: 0} if (x_aval.shape, x_aval.dtype) == (y_aval.shape, y_aval.dtype) else None
    return ffi_lowering("cusync_synced_mlp", ctx, args, plan, ACTIVATIONS[activation][0],
                        operand_output_aliases=aliases)


def _cuda_lowering(ctx, *args, plan: MlpPlan, activation: str):
    _backend.ensure_cuda_registered()
    cuda_dtype_check(ctx, "the CUDA kernels run")
    for t in (plan.tile1, plan.tile2):
        kernels.cuda_config_for(t)
    return _lowering(ctx, *args, plan=plan, activation=activation)


mlir.register_lowering(synced_mlp_p, _lowering, platform="cpu")
mlir.register_lowering(synced_mlp_p, _cuda_lowering, platform="cuda")


def _batch(args, dims, *, plan, activation):
    x, w1, b1, w2, b2 = args
    dx, dw1, db1, dw2, db2 = dims
    if dx is not None and all(d is None for d in (dw1, db1, dw2, db2)):
        # Shared weights: the batch folds into tokens, one call.
        x = jnp.moveaxis(x, dx, 0)
        b, t, h = x.shape
        y, hid, sync = synced_mlp_p.bind(x.reshape(b * t, h), w1, b1, w2, b2, plan=plan,
                                         activation=activation)
        return (y.reshape(b, t, y.shape[-1]), hid.reshape(b, t, hid.shape[-1]), sync), (0, 0, None)
    # Per-example weights: one call per example.
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [jnp.moveaxis(a, d, 0) if d is not None
             else jnp.broadcast_to(a, (size,) + a.shape) for a, d in zip(args, dims)]
    outs = jax.lax.map(lambda a: tuple(synced_mlp_p.bind(*a, plan=plan, activation=activation)),
                       tuple(moved))
    return outs, (0, 0, 0)


batching.primitive_batchers[synced_mlp_p] = _batch


def _impl(*args, plan, activation):
    return jax.jit(functools.partial(synced_mlp_p.bind, plan=plan, activation=activation))(*args)


synced_mlp_p.def_impl(_impl)


# ---------------------------------------------------------- differentiation
# First-order reverse mode runs the custom VJP below (the forward's h, one
# recomputed GEMM). The primitive also has a JVP rule, the tangent of the
# same function in jnp, so that differentiating a gradient (grad of grad, a
# Hessian) differentiates the forward pass inside it too.
def _jvp(primals, tangents, *, plan, activation):
    outs = synced_mlp_p.bind(*primals, plan=plan, activation=activation)
    dtype = primals[0].dtype
    dy, da = jvp_of(lambda x, w1, b1, w2, b2: _reference_with_hidden(x, w1, w2, b1, b2, activation, jnp.float32),
                    primals, tangents)
    # h's tangent where h is act(z) ([tokens, ffn]); SwiGLU's h has the
    # backend's packed layout, and nothing differentiates through it (the VJP
    # reads h for relu and identity only).
    dh = da.astype(dtype) if activation_slices(activation) == 1 else jnp.zeros_like(outs[1])
    return outs, (dy.astype(dtype), dh, no_tangent(outs[2]))


jax.interpreters.ad.primitive_jvps[synced_mlp_p] = _jvp


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def _mlp(x, w1, b1, w2, b2, plan, activation):
    return synced_mlp_p.bind(x, w1, b1, w2, b2, plan=plan, activation=activation)[0]


def _mlp_fwd(x, w1, b1, w2, b2, plan, activation):
    y, h, _ = synced_mlp_p.bind(x, w1, b1, w2, b2, plan=plan, activation=activation)
    return y, (x, w1, b1, w2, h)


def _mlp_bwd(plan, activation, res, dy):
    # The forward's intermediate h (after the activation) gives dw2; the
    # activation's derivative needs the pre-activation, recomputed here with
    # one GEMM (cheaper than keeping it: the forward never stores it).
    x, w1, b1, w2, h = res
    f32 = jnp.float32
    dy32 = dy.astype(f32)
    z = jnp.dot(x, w1, preferred_element_type=f32) + b1.astype(f32)
    a, act_vjp = jax.vjp(lambda z_: apply_activation(activation, z_), z)
    if activation in ("relu", "identity"):
        a = h.astype(f32)
    da = jnp.dot(dy32, w2.T.astype(f32))
    (dz,) = act_vjp(da)
    dw2 = jnp.dot(a.T, dy32)
    dx = jnp.dot(dz, w1.T.astype(f32))
    dw1 = jnp.dot(x.T.astype(f32), dz)
    return (dx.astype(x.dtype), dw1.astype(w1.dtype), dz.sum(0).astype(b1.dtype),
            dw2.astype(w2.dtype), dy32.sum(0).astype(w2.dtype))


_mlp.defvjp(_mlp_fwd, _mlp_bwd)


# -------------------------------------------------------------- public API
def synced_mlp(x, w1, w2, *, b1=None, b2=None, activation: str = "gelu", policy="auto",
               tile=None, mode: str = "auto", optimizations: Optional[Optimizations] = None,
               cpu: Optional[CpuOptions] = None, stream_k=None, mma_schedule: str = "auto",
               plan: Optional[MlpPlan] = None):
    """``act(x @ w1 + b1) @ w2 + b2`` with the two GEMMs synchronized tile by tile.

    x: [..., hidden] (leading dimensions fold into tokens); w1: [hidden, ffn]
    ([hidden, 2 * ffn] = [gate | up] for ``activation="swiglu"``); w2: [ffn, out];
    b1, b2: optional biases of w1's and w2's columns. All one dtype: float32,
    float16 or bfloat16.

    activation: "gelu" (exact, erf), "gelu_tanh", "relu", "silu", "identity", "swiglu".
    policy: "auto", TileSync(), RowSync(), StridedSync(slices) or their names.
    tile: (m, n[, k]) for both GEMMs, or a pair of them; None lets the planner choose.
    mode: "auto", "fused" (one persistent schedule, cannot deadlock), "streams"
    (the paper's two streams), "serial" (stream order: the StreamSync baseline).
    optimizations: an Optimizations; cpu: CpuOptions for the CPU executor.
    stream_k: serial mode on the Hopper kernel: None (off), "auto" (where it
    pays), a bool, or (producer, consumer) bools (plan_mlp).
    mma_schedule: the Hopper kernel's form of whole 128x128 and 96x128 tiles: "auto",
    "pingpong" or "cooperative" (plan_mlp).
    plan: a complete MlpPlan (from plan_mlp(...).plan), overriding the above.

    With everything automatic on a GPU, shapes where XLA's own ops measured (or
    are predicted) faster run as plain jnp: ``plan_mlp(...).fallback`` says
    which; pass a policy or mode to run the synced kernels regardless.
    """
    activation, hidden, ffn, out, dtype = _validate(x, w1, w2, b1, b2, activation)
    check_mode(mode)
    pol = parse_policy(policy)
    if isinstance(pol, StridedSync) and pol.slices != activation_slices(activation):
        raise ValueError(
            f"policy: StridedSync({pol.slices}) needs an activation whose w1 has {pol.slices} "
            f"column slices; activation {activation!r} has {activation_slices(activation)}")
    lead = np.shape(x)[:-1]
    tokens = int(np.prod(lead)) if lead else 1
    if plan is None:
        plan = plan_mlp(tokens, hidden, ffn, out, activation=activation, device=default_device(),
                        tile=tile, policy=policy, mode=mode, optimizations=optimizations,
                        cpu=cpu, dtype=dtype, stream_k=stream_k, mma_schedule=mma_schedule).plan
    elif not isinstance(plan, MlpPlan):
        raise TypeError(f"plan: expected an MlpPlan, got {type(plan).__name__}")
    if plan.fallback:
        # XLA's own ops are faster for this shape on this device (plan_mlp).
        return mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation, precision=None)
    x2 = jnp.reshape(x, (tokens, hidden))
    b1 = jnp.zeros((w1.shape[1],), dtype) if b1 is None else b1
    b2 = jnp.zeros((out,), dtype) if b2 is None else b2
    y = _mlp(*vary_together(x2, w1, b1, w2, b2), plan, activation)
    return jnp.reshape(y, lead + (out,))


def mlp_reference(x, w1, w2, *, b1=None, b2=None, activation: str = "gelu",
                  precision=jnp.float32):
    """The same function in plain jnp, computed in ``precision`` (the tests'
    reference and the benchmark's XLA row when called with precision=None)."""
    check_activation(activation)
    return _reference_with_hidden(x, w1, w2, b1, b2, activation, precision)[0]


def _reference_with_hidden(x, w1, w2, b1, b2, activation, precision):
    """(y, act(x @ w1 + b1)) in plain jnp: mlp_reference, and the tangents of
    the op's JVP rule."""
    cast = (lambda a: a.astype(precision)) if precision is not None else (lambda a: a)
    z = cast(x) @ cast(w1)
    if b1 is not None:
        z = z + cast(b1)
    a = apply_activation(activation, z)
    y = a @ cast(w2)
    if b2 is not None:
        y = y + cast(b2)
    return y, a
