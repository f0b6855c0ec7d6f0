"""Loads the compiled backends and registers their XLA FFI targets.

The CPU module is always built. The CUDA module is imported only when a
lowering for a CUDA device asks for it, so importing cusync_jax never touches
a GPU driver.
"""
from __future__ import annotations

import functools

import jax

from . import _cusync_cpu
from .policies import MODE_CODES

SYNC_HEADER_WORDS = _cusync_cpu.SYNC_HEADER_WORDS


def mlp_sync_words(tokens: int, hidden: int, ffn: int, out: int, slices: int, plan) -> int:
    """int32 words of a synced-MLP call's sync buffer, from the C++ layout the
    handlers check it against (semaphores; with stream-K, counts and partial sums;
    in fused mode, the placed schedule's flags)."""
    t1, t2 = plan.tile1, plan.tile2
    return _cusync_cpu.mlp_sync_words(tokens, hidden, ffn, out, slices, [t1.m, t1.n, t1.k],
                                      [t2.m, t2.n, t2.k], plan.stream_k[0], plan.stream_k[1],
                                      plan.stream_k_ctas, MODE_CODES[plan.mode])

for _name, _capsule in _cusync_cpu.registrations().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu")


@functools.cache
def cuda_module():
    """The CUDA backend module, or None when it was not built."""
    try:
        from . import _cusync_cuda
    except ImportError:
        return None
    return _cusync_cuda


@functools.cache
def ensure_cuda_registered() -> None:
    """Registers the CUDA handlers (once); raises if the backend was not built."""
    mod = cuda_module()
    if mod is None:
        raise RuntimeError(
            "cusync_jax was built without its CUDA backend (nvcc was not found, or "
            "CUSYNC_JAX_CUDA=OFF); rebuild with nvcc on the PATH to run on a GPU")
    for name, capsule in mod.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")


def cuda_built() -> bool:
    return cuda_module() is not None
