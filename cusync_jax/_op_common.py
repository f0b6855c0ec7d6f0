"""Operand checks and defaults that every synced op shares (the MLP, the conv
pair), so they read and fail alike."""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from .policies import MODES

FLOAT_DTYPES = (jnp.float32, jnp.float16, jnp.bfloat16)


def shape_of(a) -> tuple:
    return tuple(np.shape(a))


def check_float_dtypes(first, *others):
    """``first`` and ``others`` are (name, array or None) pairs. The first sets
    the dtype (float32, float16 or bfloat16); every other must match it."""
    name0, a0 = first
    dtype = jnp.result_type(a0)
    if dtype not in [jnp.dtype(d) for d in FLOAT_DTYPES]:
        raise TypeError(f"{name0}: expected float32, float16 or bfloat16, got {dtype}")
    for name, a in others:
        if a is not None and jnp.result_type(a) != dtype:
            raise TypeError(f"{name}: dtype {jnp.result_type(a)} does not match {name0}'s dtype "
                            f"{dtype}; cast the operands to one dtype")
    return dtype


def ffi_lowering(target: str, ctx, args, plan, activation_code: int, operand_output_aliases=None,
                 extra_attrs: Optional[dict] = None):
    """Lowers a synced op to its FFI custom call, the plan (and extra_attrs) as
    integer attributes (names as in ffi/common/*_spec.h); operand_output_aliases:
    {operand: result} buffers the call may share."""
    attrs = {k: np.int64(v) for k, v in {**plan.attributes(activation_code), **(extra_attrs or {})}.items()}
    return jax.ffi.ffi_lowering(target, operand_output_aliases=operand_output_aliases)(ctx, *args, **attrs)


# Under shard_map a synced op runs once per shard: its outputs vary over the
# manual mesh axes its inputs vary over. (Without that, JAX took them for
# replicated: out_specs=P() silently kept one shard's result, and gradients
# failed their axis check.)
def varying_axes(aval) -> frozenset:
    """The manual mesh axes a value varies over (jax >= 0.10: aval.mat;
    earlier: aval.vma)."""
    mat = getattr(aval, "mat", None)
    return frozenset(mat.varying) if mat is not None else frozenset(getattr(aval, "vma", ()))


def vary_together(*arrays):
    """The arrays (None stays None), each cast to vary over every manual mesh
    axis any of them varies over (a replicated weight beside sharded tokens:
    its gradient is then summed over the axis, as for jnp ops)."""
    union = frozenset().union(*(varying_axes(jax.typeof(a)) for a in arrays if a is not None))
    if not union:
        return arrays
    cast = getattr(jax.lax, "pcast", None)
    out = []
    for a in arrays:
        missing = tuple(sorted(union - varying_axes(jax.typeof(a)))) if a is not None else ()
        if missing:
            a = cast(a, missing, to="varying") if cast is not None else jax.lax.pvary(a, missing)
        out.append(a)
    return tuple(out)


def out_aval(shape, dtype, *inputs):
    """An output's abstract value: like the inputs' (vary_together made their
    axes one set) where they vary over manual axes, else a plain array."""
    widest = max(inputs, key=lambda a: len(varying_axes(a)))
    if varying_axes(widest):
        return widest.update(shape=tuple(shape), dtype=dtype, weak_type=False)
    return jax.core.ShapedArray(shape, dtype)


def cuda_dtype_check(ctx, what_runs: str) -> None:
    """A CUDA lowering's refusal of float32 (the CUDA kernels take float16
    and bfloat16), raised before anything runs. what_runs: "the CUDA kernels
    run", say."""
    dtype = ctx.avals_in[0].dtype
    if dtype not in (jnp.float16, jnp.bfloat16):
        raise TypeError(f"x: {what_runs} float16 and bfloat16, got {dtype}; cast the operands (float32 runs "
                        "on the CPU backend, and policy='auto' runs XLA's ops for it)")


def jvp_of(reference, primals, tangents):
    """The tangents of ``reference`` (a jnp function of the op's operands)
    at the primals, symbolic zero tangents made concrete."""
    tangents = tuple(jax.interpreters.ad.instantiate_zeros(t) for t in tangents)
    return jax.jvp(reference, tuple(primals), tangents)[1]


def no_tangent(value):
    """The tangent of an output nothing differentiates (the sync words)."""
    return jax.interpreters.ad.Zero(jax.typeof(value).to_tangent_aval())


def check_mode(mode) -> None:
    if mode not in ("auto",) + MODES:
        raise ValueError(f"mode: expected 'auto' or one of {MODES}, got {mode!r}")


def default_device():
    """The planner's device for the default JAX backend: "cpu", or the wave
    model of the first GPU, read off the device (SMs, compute capability)."""
    if jax.default_backend() == "cpu":
        return "cpu"
    from .planner import device_model
    return device_model(jax.devices()[0])
