"""Profile one conv pair under Nsight Compute: XLA's (cuDNN's) convolutions
and the project's pair on the Hopper conv, each launched once inside a
profiler range (compilation and autotuning happen before it). With the
memory metrics it says how many bytes each kernel moves from L2 to the SMs:
an implicit GEMM through im2col reads each input pixel once per filter tap.

    ncu --profile-from-start off --section SpeedOfLight --metrics lts__t_bytes.sum,dram__bytes.sum \\
        python bench/profile_conv.py 32 56 64 --mode serial

Needs cupy (for cudaProfilerStart/Stop) and a GPU.
"""
from __future__ import annotations

import argparse

import cupy
import jax
import jax.numpy as jnp

import cusync_jax as cs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("batch", type=int)
    ap.add_argument("size", type=int, help="height = width")
    ap.add_argument("channels", type=int, help="in = mid = out channels")
    ap.add_argument("--in-channels", type=int, default=None, help="conv 1's input channels (default: channels)")
    ap.add_argument("--mode", default="serial", choices=("serial", "streams", "fused"))
    ap.add_argument("--policy", default="conv2dtilesync")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    args = ap.parse_args(argv)
    n, s, c = args.batch, args.size, args.channels
    c0 = args.in_channels or c
    ks = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(ks[0], (n, s, s, c0), jnp.float32).astype(args.dtype)
    k1 = (jax.random.normal(ks[1], (3, 3, c0, c), jnp.float32) / (9 * c0) ** 0.5).astype(args.dtype)
    k2 = (jax.random.normal(ks[2], (3, 3, c, c), jnp.float32) / (9 * c) ** 0.5).astype(args.dtype)
    plan = cs.plan_conv_pair(n, s, s, c0, c, c, device="h200", tile=(128, 64 if c == 64 else 128, 64),
                             policy=args.policy, mode=args.mode).plan
    xla = jax.jit(lambda x, k1, k2: cs.conv_pair_reference(x, k1, k2, precision=None))
    ours = jax.jit(lambda x, k1, k2: cs.synced_conv_pair(x, k1, k2, plan=plan))
    for f in (xla, ours):  # compile, autotune, warm up
        f(x, k1, k2).block_until_ready()
    cupy.cuda.profiler.start()
    for f in (xla, ours):
        f(x, k1, k2).block_until_ready()
    cupy.cuda.profiler.stop()


if __name__ == "__main__":
    main()
