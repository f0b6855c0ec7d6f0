"""Where the time of a call goes besides the kernel: the same GEMM timed two ways.

  loop   the benchmarks' method (bench/timing.py): chained calls in one
         jitted fori_loop
  async  one jitted call per dispatch, many dispatched before one wait:
         max(host time per call, device time per call)

for XLA's dot and for the package's GEMM (`cusync_jax.gemm`) on the same
inputs, alternated in rounds. `--tiny` times 128x128x128 products, where the
device time is a few microseconds, so `async` is the host's time per call.
(Chained calls written out in one jitted function are no measure: XLA drops
all but the last.)

    python bench/dispatch.py [--rows 256 1024] [--rounds 10] [--tiny]

Run it with and without XLA_FLAGS=--xla_gpu_enable_command_buffer= to see
what CUDA graphs give each side. Prints one table; writes nothing.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

import jax
import jax.numpy as jnp

from cusync_jax.gemm import gemm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402
from gemm import step_for  # noqa: E402

SHAPES = ((6144, 12288), (12288, 6144))


def async_ms(fn, args, calls):
    """Per-call time of `calls` dispatches of a single-call function, one wait at the end."""
    out = None
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) * 1e3 / calls


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", type=int, default=[256, 1024])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--iters", type=int, default=20, help="chained calls per loop")
    ap.add_argument("--tiny", action="store_true", help="128x128x128 only: the host's time per call")
    args = ap.parse_args(argv)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}  {jax.devices()[0].device_kind}")
    impls = {"xla": jnp.dot, "cusync": lambda a, w: gemm(a, w, tile_n=128)}
    forms = ("loop", "async")
    print(f"{'M':>5s} {'N':>6s} {'K':>6s}  " + "  ".join(f"{i + ' ' + f:>16s}" for i in impls for f in forms))
    cases = [(128, 128, 128)] if args.tiny else [(m, n, k) for m in args.rows for n, k in SHAPES]
    for m, n, k in cases:
        ka, kw = jax.random.split(jax.random.key(m + n + k))
        a = jax.random.normal(ka, (m, k), jnp.float32).astype(jnp.float16)
        w = (jax.random.normal(kw, (k, n), jnp.float32) / k ** 0.5).astype(jnp.float16)
        carry = (a, jnp.zeros((m, n), jnp.float16))
        variants = {}
        for name, fn in impls.items():
            step = step_for(fn)
            variants[f"{name} loop"] = (timing.chained(step, args.iters), (carry, w), args.iters)
        ms = timing.alternate(variants, rounds=args.rounds)
        for name, fn in impls.items():
            single = jax.jit(step_for(fn))
            jax.block_until_ready(single(carry, w))
            ms[f"{name} async"] = statistics.median(
                async_ms(single, (carry, w), 200) for _ in range(args.rounds))
        print(f"{m:5d} {n:6d} {k:6d}  " + "  ".join(f"{ms[i + ' ' + f]:16.4f}" for i in impls for f in forms),
              flush=True)


if __name__ == "__main__":
    main()
