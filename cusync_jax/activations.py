"""Activation names, their codes in the cuSync core, and jnp references."""
from __future__ import annotations

import jax
import jax.numpy as jnp

# name -> (code in ffi/include/cusync/activation.h, output slices of w1)
ACTIVATIONS = {
    "identity": (0, 1),
    "relu": (1, 1),
    "gelu": (2, 1),       # exact (erf); jax.nn.gelu(x, approximate=False)
    "gelu_tanh": (3, 1),  # tanh approximation; jax.nn.gelu's default
    "silu": (4, 1),
    "swiglu": (5, 2),     # w1 = [gate | up]: silu(x @ gate) * (x @ up)
}


def check_activation(activation, name: str = "activation") -> str:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(f"{name}: expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
    return activation


def activation_slices(activation: str) -> int:
    return ACTIVATIONS[activation][1]


def apply_activation(activation: str, z):
    """The activation as the producer applies it, in jnp (z holds all slices)."""
    if activation == "identity":
        return z
    if activation == "relu":
        return jax.nn.relu(z)
    if activation == "gelu":
        return jax.nn.gelu(z, approximate=False)
    if activation == "gelu_tanh":
        return jax.nn.gelu(z, approximate=True)
    if activation == "silu":
        return jax.nn.silu(z)
    if activation == "swiglu":
        gate, up = jnp.split(z, 2, axis=-1)
        return jax.nn.silu(gate) * up
    raise ValueError(f"activation: unknown {activation!r}")
