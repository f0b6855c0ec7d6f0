"""How much a GEMM at few rows gains when its weights are already in L2.

At 256-512 tokens a CTA of the MLP's GEMMs runs one or two tiles and streams
its weight columns once; whether the weights come from DRAM or from L2 is the
question behind a consumer GEMM whose weights the producer's idle SMs could
load into L2 beforehand. Each variant (XLA's dot, the package's GEMM) runs
`copies` calls a loop step:
  cold: each call on its own copy of w (the copies together several times L2),
  warm: every call on the same w (it stays in L2 where it fits).
Per call it reports the GEMM kernel's median duration from the profiler's
events (the chaining add of bench/gemm.py is a kernel of its own, left out).

    python bench/weights_l2.py --shapes 256x8192x2816 256x4096x4096 --out $OUT/weights_l2.json
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import device_time  # noqa: E402
import timing  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parse_shape(text: str) -> tuple:
    try:
        m, n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape: expected MxNxK, got {text!r}") from None
    return m, n, k


def looped(fn, calls: int, steps: int):
    """jit((a, ws) -> steps loop steps of `calls` chained fn(a, ws[j]))."""
    @jax.jit
    def run(a, ws):
        def step(_, a):
            for j in range(calls):
                out = fn(a, ws[j % len(ws)])
                a = a.at[0, 0].add((out[0, 0] * 0).astype(a.dtype))
            return a
        return jax.lax.fori_loop(0, steps, step, a)
    return run


def kernels_us(events: list) -> dict:
    """name -> (median us, count) of each kernel of the launch."""
    by_name: dict = {}
    for e in events:
        if e.get("cat") == "kernel":
            by_name.setdefault(e["name"], []).append(e["dur"])
    return {name: (statistics.median(d), len(d)) for name, d in by_name.items()}


def gemm_kernel_us(events: list) -> tuple:
    """(name, median us, count) of the kernel with the most time in the launch,
    and every kernel's (median us, count)."""
    kernels = kernels_us(events)
    name = max(kernels, key=lambda n: kernels[n][0] * kernels[n][1])
    return name, kernels[name][0], kernels[name][1], kernels


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", nargs="+", type=parse_shape, default=[(256, 8192, 2816), (256, 4096, 4096)])
    p.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    p.add_argument("--cold-mb", type=float, default=200.0, help="total size of the cold copies")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tile-n", type=int, default=128)
    p.add_argument("--out", default=None)
    p.add_argument("--commit", default=None)
    args = p.parse_args(argv)

    from cusync_jax.gemm import gemm
    dtype = jnp.dtype(args.dtype)
    variants = {"xla": jnp.dot, f"sm90_128x{args.tile_n}": lambda a, w: gemm(a, w, tile_n=args.tile_n)}
    commit, dirty = timing.git_state(ROOT)
    try:
        import torch
        l2_mb = torch.cuda.get_device_properties(0).L2_cache_size / 1e6
    except Exception:  # noqa: BLE001 (the size is only printed)
        l2_mb = None
    print(f"{jax.devices()[0].device_kind}: L2 {l2_mb} MB", flush=True)
    rows = []
    for m, n, k in args.shapes:
        w_mb = k * n * dtype.itemsize / 1e6
        copies = max(2, int(-(-args.cold_mb // w_mb)))
        ka, kw = jax.random.split(jax.random.key(m + n + k))
        a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
        ws = [(jax.random.normal(jax.random.fold_in(kw, j), (k, n), jnp.float32) / k ** 0.5).astype(dtype)
              for j in range(copies)]
        for name, fn in variants.items():
            for cond, weights in (("cold", ws), ("warm", ws[:1])):
                run = looped(fn, copies, args.steps)
                jax.block_until_ready(run(a, weights))
                meds = []
                for _ in range(args.repeats):
                    kname, us, count, kernels = gemm_kernel_us(device_time.gpu_events(run, (a, weights)))
                    meds.append(us)
                row = dict(m=m, n=n, k=k, dtype=args.dtype, impl=name, weights=cond, copies=len(weights),
                           weight_mb=round(w_mb, 1), kernel=kname[:80], calls=count, us=round(min(meds), 2),
                           us_repeats=[round(v, 2) for v in meds],
                           kernels={kn[:80]: [round(u, 2), c] for kn, (u, c) in kernels.items()})
                rows.append(row)
                print(f"{m}x{n}x{k} {name:12s} {cond}: {row['us']:8.2f} us a call ({count} calls, "
                      f"{len(weights)} weight copies of {w_mb:.0f} MB; {kname[:60]})", flush=True)
    for m, n, k in args.shapes:
        for name in variants:
            t = {r["weights"]: r["us"] for r in rows if (r["m"], r["n"], r["k"], r["impl"]) == (m, n, k, name)}
            print(f"{m}x{n}x{k} {name:12s} warm/cold {t['warm'] / t['cold']:.3f}")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(dict(
            what="GEMM kernel time per call, weights cold (DRAM) against warm (L2)",
            device=jax.devices()[0].device_kind, jax=jax.__version__, commit=args.commit or commit,
            dirty=dirty, l2_mb=l2_mb, rows=rows), indent=1))


if __name__ == "__main__":
    main()
