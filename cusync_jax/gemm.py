"""gemm: a @ w on the Hopper GEMM-chain kernel (kernel family 1) alone.

The synced MLP's two GEMMs run on this kernel; timing it without the second
GEMM and without synchronization (bench/gemm.py) separates the GEMM's own
speed from what the synchronization saves. Needs a Hopper GPU.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _backend
from .policies import ORDER_CODES

TILE_WIDTHS = (96, 128, 192, 256)
GEMM_ORDERS = ("row_major", "column_major", "grouped")


def gemm(a, w, *, tile_n: int = 128, order: str = "grouped", group_rows: int = 8,
         cluster_m: int = 1):
    """``a @ w`` for a: [m, k], w: [k, n], both float16 or both bfloat16
    (float32 accumulation); tile_n: the kernel's tile width, 96, 128, 192 or 256;
    order, group_rows: the tile order (cusync_jax.plan_mlp explains them);
    cluster_m: 1, or 2 for 2x1 clusters sharing each w tile through TMA
    multicast (tile_n 128 only)."""
    if np.ndim(a) != 2 or np.ndim(w) != 2 or np.shape(a)[1] != np.shape(w)[0]:
        raise ValueError(f"a, w: expected shapes [m, k] and [k, n], got {np.shape(a)} and {np.shape(w)}")
    dtype = jnp.result_type(a)
    if dtype not in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)) or jnp.result_type(w) != dtype:
        raise TypeError(f"a, w: expected one dtype, float16 or bfloat16; got {dtype} and {jnp.result_type(w)}")
    (m, k), n = np.shape(a), np.shape(w)[1]
    if n % 8 or k % 8:
        raise ValueError(f"w: n and k must be multiples of 8 (16-byte rows for TMA), got shape {np.shape(w)}")
    if tile_n not in TILE_WIDTHS:
        raise ValueError(f"tile_n: expected one of {TILE_WIDTHS}, got {tile_n!r}")
    if order not in GEMM_ORDERS:
        raise ValueError(f"order: expected one of {GEMM_ORDERS}, got {order!r}")
    if not isinstance(group_rows, int) or isinstance(group_rows, bool) or group_rows < 1:
        raise ValueError(f"group_rows: expected a positive int, got {group_rows!r}")
    if not isinstance(cluster_m, int) or isinstance(cluster_m, bool) or cluster_m not in (1, 2):
        raise ValueError(f"cluster_m: expected 1 or 2, got {cluster_m!r}")
    if cluster_m == 2 and tile_n != 128:
        raise ValueError(f"cluster_m=2: runs tile_n 128 only, got {tile_n}")
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"gemm: runs the Hopper kernel on a CUDA GPU only; the default backend is "
                           f"{jax.default_backend()!r} (on a CPU, use jnp.dot)")
    _backend.ensure_cuda_registered()
    return jax.ffi.ffi_call("cusync_gemm", jax.ShapeDtypeStruct((m, n), dtype))(
        a, w, tile_n=np.int64(tile_n), order=np.int64(ORDER_CODES[order]),
        group_rows=np.int64(group_rows), cluster_m=np.int64(cluster_m))
