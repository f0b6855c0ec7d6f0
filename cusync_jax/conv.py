"""synced_conv_pair: two stride-1 SAME convolutions (a ResNet basic block with
BatchNorm folded into the biases) as one JAX primitive whose producer (first
conv) and consumer (second conv) tiles synchronize through cuSync semaphores
instead of a kernel boundary:

    y = out_act(conv(act(conv(x, k1) + b1), k2) + b2 (+ residual))
"""
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
from .activations import ACTIVATIONS, apply_activation
from .conv_unfold import unfold_first_conv
from .conv_planner import (FILTERS, PIXEL8_CHANNELS, ConvPairPlan, check_conv_activation, conv_sync_words,
                           plan_conv_pair, resolve_conv_policy)
from .planner import CpuOptions
from .policies import Optimizations

synced_conv_pair_p = jex_core.Primitive("cusync_synced_conv_pair")
synced_conv_pair_p.multiple_results = True

_LAYOUT = ("NHWC", "HWIO", "NHWC")


# ---------------------------------------------------------------- validation
def _check_filter(name: str, k) -> None:
    shape = shape_of(k)
    if np.ndim(k) != 4:
        raise ValueError(f"{name}: expected an HWIO filter [R, S, C_in, C_out] (rank 4), "
                         f"got shape {shape}")
    if shape[:2] not in FILTERS:
        hint = (" (this looks like OIHW; transpose it with k.transpose(2, 3, 1, 0))"
                if shape[2:] in FILTERS else "")
        raise ValueError(f"{name}: expected an HWIO filter [R, S, C_in, C_out] with 1x1 or 3x3 "
                         f"taps (R = S in (1, 3)), got shape {shape}{hint}")


def _validate(x, k1, k2, b1, b2, residual, activation):
    activation = check_conv_activation(activation)
    if np.ndim(x) != 4:
        raise ValueError(f"x: expected an NHWC image batch [N, H, W, C] (rank 4), "
                         f"got shape {shape_of(x)}")
    _check_filter("k1", k1)
    _check_filter("k2", k2)
    n, h, w, c0 = shape_of(x)
    r1, s1, ci1, c1 = shape_of(k1)
    r2, s2, ci2, c2 = shape_of(k2)
    if ci1 != c0:
        hint = (" (if x is NCHW, transpose it with x.transpose(0, 2, 3, 1))"
                if shape_of(x)[1] == ci1 else "")
        raise ValueError(f"k1: expected shape [{r1}, {s1}, {c0}, C1] to match x's channels "
                         f"(x shape {shape_of(x)}, NHWC), got shape {shape_of(k1)}{hint}")
    for name, shape in (("x", shape_of(x)), ("k1", shape_of(k1)), ("k2", shape_of(k2))):
        if shape[-1] == 0:
            raise ValueError(f"{name}: expected at least one channel (last dimension), "
                             f"got shape {shape}")
    if ci2 != c1:
        raise ValueError(f"k2: expected shape [{r2}, {s2}, {c1}, C2] to match k1's output "
                         f"channels (k1 shape {shape_of(k1)}), got shape {shape_of(k2)}")
    if b1 is not None and shape_of(b1) != (c1,):
        raise ValueError(f"b1: expected shape ({c1},), got shape {shape_of(b1)}")
    if b2 is not None and shape_of(b2) != (c2,):
        raise ValueError(f"b2: expected shape ({c2},), got shape {shape_of(b2)}")
    if residual is not None and shape_of(residual) != (n, h, w, c2):
        raise ValueError(f"residual: expected the output's shape {(n, h, w, c2)}, "
                         f"got shape {shape_of(residual)}")
    dtype = check_float_dtypes(("x", x), ("k1", k1), ("k2", k2), ("b1", b1), ("b2", b2),
                               ("residual", residual))
    return activation, dtype


# ------------------------------------------------------------- the primitive
def _abstract_eval(x, k1, b1, k2, b2, residual, *, plan: ConvPairPlan, activation: str, out_activation: str):
    n, h, w, c0 = x.shape
    c1, c2 = k1.shape[3], k2.shape[3]
    words = conv_sync_words(n, h, w, (c0, c1, c2), (k1.shape[:2], k2.shape[:2]), plan)
    ins = (x, k1, b1, k2, b2, residual)
    return (out_aval((n, h, w, c2), x.dtype, *ins),
            out_aval((n, h, w, c1), x.dtype, *ins),
            out_aval((words,), jnp.int32, *ins))


synced_conv_pair_p.def_abstract_eval(_abstract_eval)


def _lowering(ctx, *args, plan: ConvPairPlan, activation: str, out_activation: str):
    return ffi_lowering("cusync_synced_conv_pair", ctx, args, plan, ACTIVATIONS[activation][0],
                        extra_attrs={"out_activation": ACTIVATIONS[out_activation][0]})


def _cuda_lowering(ctx, *args, plan: ConvPairPlan, activation: str, out_activation: str):
    _backend.ensure_cuda_registered()
    cuda_dtype_check(ctx, "the CUDA conv pair runs")
    for t in (plan.tile1, plan.tile2):
        kernels.cuda_config_for(t, kernels.CONV_CUDA_CONFIGS + kernels.CONV_SM90_CONFIGS
                                + kernels.CONV_HALO_CONFIGS)
    return _lowering(ctx, *args, plan=plan, activation=activation, out_activation=out_activation)


mlir.register_lowering(synced_conv_pair_p, _lowering, platform="cpu")
mlir.register_lowering(synced_conv_pair_p, _cuda_lowering, platform="cuda")


def _batch(args, dims, *, plan, activation, out_activation):
    x, k1, b1, k2, b2, residual = args
    dx, dk1, db1, dk2, db2, dres = dims
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)

    def leading(a, d):
        return jnp.moveaxis(a, d, 0) if d is not None else jnp.broadcast_to(a, (size,) + a.shape)

    bind = functools.partial(synced_conv_pair_p.bind, plan=plan, activation=activation,
                             out_activation=out_activation)
    if all(d is None for d in (dk1, db1, dk2, db2)):
        # Shared filters: the batch folds into the images, one call.
        # (Explicit sizes: a batch of 0 leaves -1 undetermined.)
        xs = leading(x, dx)
        images = xs.shape[1]
        xs = xs.reshape((size * images,) + xs.shape[2:])
        if residual.size:
            residual = leading(residual, dres)
            residual = residual.reshape((size * images,) + residual.shape[2:])
        y, h, sync = bind(xs, k1, b1, k2, b2, residual)
        return ((y.reshape((size, images) + y.shape[1:]), h.reshape((size, images) + h.shape[1:]), sync),
                (0, 0, None))
    # Per-example filters: one call per example.
    moved = tuple(leading(a, d) for a, d in zip(args, dims))
    return jax.lax.map(lambda a: tuple(bind(*a)), moved), (0, 0, 0)


batching.primitive_batchers[synced_conv_pair_p] = _batch


def _impl(*args, plan, activation, out_activation):
    return jax.jit(functools.partial(synced_conv_pair_p.bind, plan=plan, activation=activation,
                                     out_activation=out_activation))(*args)


synced_conv_pair_p.def_impl(_impl)


# ---------------------------------------------------------- differentiation
def _conv(a, k):
    return jax.lax.conv_general_dilated(a, k, (1, 1), "SAME", dimension_numbers=_LAYOUT)


# First-order reverse mode runs the custom VJP below. The primitive also has
# a JVP rule, the tangent of the same function in jnp, so that
# differentiating a gradient (grad of grad, a Hessian) differentiates the
# forward pass inside it too.
def _jvp(primals, tangents, *, plan, activation, out_activation):
    outs = synced_conv_pair_p.bind(*primals, plan=plan, activation=activation, out_activation=out_activation)
    dtype = primals[0].dtype
    # (an empty residual, shape (0,), is no residual)
    dy, dh = jvp_of(lambda x, k1, b1, k2, b2, r: _reference_with_hidden(
        x, k1, k2, b1, b2, r if r.size else None, activation, jnp.float32, out_activation), primals, tangents)
    return outs, (dy.astype(dtype), dh.astype(dtype), no_tangent(outs[2]))


jax.interpreters.ad.primitive_jvps[synced_conv_pair_p] = _jvp


def fuses_out_activation(plan: ConvPairPlan, out_activation: str) -> bool:
    """Whether the plan's kernel applies out_activation in its epilogue, after
    the residual: the halo conv (kernel family 2) applies ReLU, ResNet's
    block's last op (one pass over y less). Elsewhere the op applies it after
    the call."""
    return out_activation == "identity" or (plan.kernel == 2 and out_activation == "relu")


# residual is [N, H, W, C2], or empty (shape (0,)) when there is none.
# out_activation: "identity", or one the plan's kernel applies (fuses_out_activation).
@functools.partial(jax.custom_vjp, nondiff_argnums=(6, 7, 8))
def _conv_pair(x, k1, b1, k2, b2, residual, plan, activation, out_activation):
    return synced_conv_pair_p.bind(x, k1, b1, k2, b2, residual, plan=plan,
                                   activation=activation, out_activation=out_activation)[0]


def _conv_pair_fwd(x, k1, b1, k2, b2, residual, plan, activation, out_activation):
    y, h, _ = synced_conv_pair_p.bind(x, k1, b1, k2, b2, residual, plan=plan,
                                      activation=activation, out_activation=out_activation)
    # An empty residual stays in the residuals (it costs nothing) so the
    # backward knows its cotangent's shape. A ReLU's derivative is y > 0.
    return y, (x, k1, b1, k2, h, residual if residual.size == 0 else None,
               y if out_activation == "relu" else None)


def _conv_pair_bwd(plan, activation, out_activation, res, dy):
    # The forward's h (after the activation) feeds dk2; the activation's
    # derivative needs the pre-activation, recomputed with one convolution.
    x, k1, b1, k2, h, empty_residual, y = res
    f32 = jnp.float32
    dy32 = dy.astype(f32)
    if out_activation == "relu":
        dy32 = jnp.where(y > 0, dy32, 0.0)
        dy = dy32.astype(dy.dtype)
    z, conv1_vjp = jax.vjp(_conv, x.astype(f32), k1.astype(f32))
    z = z + b1.astype(f32)
    a, act_vjp = jax.vjp(lambda z_: apply_activation(activation, z_), z)
    if activation in ("relu", "identity"):
        a = h.astype(f32)
    _, conv2_vjp = jax.vjp(_conv, a, k2.astype(f32))
    da, dk2 = conv2_vjp(dy32)
    (dz,) = act_vjp(da)
    dx, dk1 = conv1_vjp(dz)
    dres = jnp.zeros_like(empty_residual) if empty_residual is not None else dy.astype(x.dtype)
    return (dx.astype(x.dtype), dk1.astype(k1.dtype), dz.sum((0, 1, 2)).astype(b1.dtype),
            dk2.astype(k2.dtype), dy32.sum((0, 1, 2)).astype(k2.dtype), dres)


_conv_pair.defvjp(_conv_pair_fwd, _conv_pair_bwd)


# -------------------------------------------------------------- public API
def synced_conv_pair(x, k1, k2, *, b1=None, b2=None, activation: str = "relu", residual=None,
                     out_activation: str = "identity", policy="auto", tile=None, mode: str = "auto",
                     optimizations: Optional[Optimizations] = None,
                     cpu: Optional[CpuOptions] = None, plan: Optional[ConvPairPlan] = None):
    """``out_act(conv(act(conv(x, k1) + b1), k2) + b2 (+ residual))`` with the
    two convolutions synchronized tile by tile.

    x: [N, H, W, C0] (NHWC); k1: [R1, S1, C0, C1] and k2: [R2, S2, C1, C2]
    (HWIO, 1x1 or 3x3 taps); stride 1, SAME padding. b1 [C1], b2 [C2]:
    optional biases (BatchNorm folded in); residual: optional [N, H, W, C2]
    added last (a ResNet basic block). All one dtype: float32, float16 or
    bfloat16.

    activation: "relu", "gelu" (exact), "gelu_tanh", "silu", "identity".
    out_activation: the same choices, applied last (ResNet's block: "relu"
    after the residual); the halo conv applies ReLU in its epilogue.
    policy: "auto", Conv2DTileSync(R2, S2), TileSync(), RowSync() or their names.
    tile: (m, n[, k]) for both implicit GEMMs (m: output pixels, n: output
    channels, k: channels of one filter tap), or a pair; None lets the planner choose.
    mode: "auto", "fused", "streams" or "serial" (the StreamSync baseline).
    optimizations: an Optimizations; cpu: CpuOptions for the CPU executor.
    plan: a complete ConvPairPlan (plan_conv_pair(...).plan), overriding the above.
    """
    activation, dtype = _validate(x, k1, k2, b1, b2, residual, activation)
    out_activation = check_conv_activation(out_activation, "out_activation")
    check_mode(mode)
    filter2 = shape_of(k2)[:2]
    resolve_conv_policy(policy, filter2)
    n, h, w, c0 = shape_of(x)
    c1, c2 = shape_of(k1)[3], shape_of(k2)[3]
    if plan is None:
        plan = plan_conv_pair(n, h, w, c0, c1, c2, filter1=shape_of(k1)[:2], filter2=filter2,
                              activation=activation, device=default_device(), tile=tile,
                              policy=policy, mode=mode, optimizations=optimizations, cpu=cpu,
                              dtype=dtype, residual=residual is not None).plan
    elif not isinstance(plan, ConvPairPlan):
        raise TypeError(f"plan: expected a ConvPairPlan, got {type(plan).__name__}")
    if plan.fallback:
        # XLA's own convolutions are faster for this shape on this device.
        return conv_pair_reference(x, k1, k2, b1=b1, b2=b2, activation=activation,
                                   residual=residual, out_activation=out_activation, precision=None)
    if plan.unfold1:
        # (differentiated through the gather: its VJP scatters dx back)
        x, k1 = unfold_first_conv(x, k1)
    if plan.pixel8:
        x, k1 = pad_to_pixel8(x, k1)
    b1 = jnp.zeros((c1,), dtype) if b1 is None else b1
    b2 = jnp.zeros((c2,), dtype) if b2 is None else b2
    residual = jnp.zeros((0,), dtype) if residual is None else residual
    fused = fuses_out_activation(plan, out_activation)
    y = _conv_pair(*vary_together(x, k1, b1, k2, b2, residual), plan, activation,
                   out_activation if fused else "identity")
    return y if fused else apply_activation(out_activation, y)


def pad_to_pixel8(x, k1):
    """(x [N, H, W, C0], k1 [R, S, C0, C1]) with C0 zero-padded to
    PIXEL8_CHANNELS: the halo conv's 16-byte pixels; the same convolution."""
    extra = PIXEL8_CHANNELS - x.shape[-1]
    if extra < 0:
        raise ValueError(f"x: a pixel8 plan takes at most {PIXEL8_CHANNELS} channels; got {x.shape}")
    return (jnp.pad(x, ((0, 0), (0, 0), (0, 0), (0, extra))),
            jnp.pad(k1, ((0, 0), (0, 0), (0, extra), (0, 0))))


def conv_pair_reference(x, k1, k2, *, b1=None, b2=None, activation: str = "relu", residual=None,
                        out_activation: str = "identity", precision=jnp.float32):
    """The same function with lax.conv_general_dilated, computed in
    ``precision`` (the tests' reference; the benchmark's XLA row with
    precision=None)."""
    activation = check_conv_activation(activation)
    out_activation = check_conv_activation(out_activation, "out_activation")
    return _reference_with_hidden(x, k1, k2, b1, b2, residual, activation, precision, out_activation)[0]


def _reference_with_hidden(x, k1, k2, b1, b2, residual, activation, precision, out_activation="identity"):
    """(y, act(conv(x, k1) + b1)) with lax convolutions: conv_pair_reference,
    and the tangents of the op's JVP rule."""
    cast = (lambda a: a.astype(precision)) if precision is not None else (lambda a: a)
    z = _conv(cast(x), cast(k1))
    if b1 is not None:
        z = z + cast(b1)
    a = apply_activation(activation, z)
    y = _conv(a, cast(k2))
    if b2 is not None:
        y = y + cast(b2)
    if residual is not None:
        y = y + cast(residual)
    return apply_activation(out_activation, y), a
