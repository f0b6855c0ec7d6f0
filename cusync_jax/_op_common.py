"""Operand checks and defaults that every synced op shares (the MLP, the conv
pair), so they read and fail alike."""
from __future__ import annotations

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


def ffi_lowering(target: str, ctx, args, plan, activation_code: int, operand_output_aliases=None):
    """Lowers a synced op to its FFI custom call, the plan as integer attributes
    (names as in ffi/common/*_spec.h); operand_output_aliases: {operand: result}
    buffers the call may share."""
    attrs = {k: np.int64(v) for k, v in plan.attributes(activation_code).items()}
    return jax.ffi.ffi_lowering(target, operand_output_aliases=operand_output_aliases)(ctx, *args, **attrs)


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
