"""Profile one GEMM shape under Nsight Compute: XLA's dot and the project's
kernel, each launched once inside a profiler range (compilation and XLA's
autotuning happen before the range, so only the two timed launches are
captured).

    ncu --profile-from-start off --set detailed -o gemm python bench/profile_gemm.py 256 6144 12288

Needs cupy (for cudaProfilerStart/Stop) and a GPU.
"""
from __future__ import annotations

import argparse

import cupy
import jax
import jax.numpy as jnp

from cusync_jax.gemm import gemm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("m", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("k", type=int)
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--tile-n", type=int, default=128)
    ap.add_argument("--cluster-m", type=int, default=1)
    args = ap.parse_args(argv)
    ka, kw = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (args.m, args.k), args.dtype)
    w = (jax.random.normal(kw, (args.k, args.n), jnp.float32) / args.k ** 0.5).astype(args.dtype)
    xla = jax.jit(lambda a, w: jnp.dot(a, w, preferred_element_type=a.dtype))
    ours = jax.jit(lambda a, w: gemm(a, w, tile_n=args.tile_n, cluster_m=args.cluster_m))
    for f in (xla, ours):  # compile, autotune, warm up
        f(a, w).block_until_ready()
    cupy.cuda.profiler.start()
    for f in (xla, ours):
        f(a, w).block_until_ready()
    cupy.cuda.profiler.stop()


if __name__ == "__main__":
    main()
