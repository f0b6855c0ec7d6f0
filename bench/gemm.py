"""Benchmark: the Hopper GEMM kernel (kernel family 1) alone against XLA's dot.

Shapes: the MLP's GEMMs, rows 256..4096 x (N, K) in
  (6144, 12288) GPT-3 first GEMM    (12288, 6144) GPT-3 second GEMM
  (5632, 8192)  LLaMA first GEMM    (8192, 2816)  LLaMA second GEMM
a [rows, K] @ w [K, N], both row-major. Variants: xla (jnp.dot), and the
kernel at each tile width of cusync_jax.gemm.TILE_WIDTHS. Times are per call
(bench/timing.py: chained calls in one jitted loop, variants alternated in
rounds, medians): with --timing device (the default on a GPU) the GPU's busy
time in a launch, with --timing loop the launch's wall time.

    python bench/gemm.py --dtype float16 bfloat16

Writes bench/results/<device>-gemm.json and prints the table.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

import jax
import jax.numpy as jnp

from cusync_jax.gemm import GEMM_ORDERS, TILE_WIDTHS, gemm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402
from orders import parse_tile_order  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROWS = (256, 1024, 2048, 4096)
SHAPES = ((6144, 12288), (12288, 6144), (5632, 8192), (8192, 2816))
DTYPES = {"float16": jnp.float16, "bfloat16": jnp.bfloat16}
ESTIMATE_TFLOPS = 500.0


def step_for(fn):
    """One chained call: the carry (a, out) -> (a', fn(a', w)), where a' is a
    with one element moved by 0 * out[0, 0]. So each call reads the previous
    call's output and XLA can neither hoist the product out of the loop nor
    drop a call (it keeps x * 0 for floats); the update is in place in the
    loop's carry, one element a call."""
    def step(carry, w):
        a, out = carry
        a = a.at[0, 0].add((out[0, 0] * 0).astype(a.dtype))
        return a, fn(a, w)
    return step


def order_arg(text: str) -> tuple:
    """A tile order -> (its part of the variant name, gemm keyword arguments)."""
    try:
        kw = parse_tile_order(text, GEMM_ORDERS)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.replace(":", ""), kw


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    ap.add_argument("--rows", nargs="+", type=int, default=list(ROWS))
    ap.add_argument("--rounds", type=int, default=20, help="timed repetitions per variant")
    # (argparse applies `type` to a string default only, so the list is parsed here)
    ap.add_argument("--orders", nargs="+", default=[order_arg("grouped"), order_arg("row_major")], type=order_arg,
                    help=f"tile orders to time for each tile width: {', '.join(GEMM_ORDERS)}, or "
                         "grouped:<rows> for bands of that many tile rows (grouped: 8)")
    ap.add_argument("--tiles", nargs="+", type=int, default=list(TILE_WIDTHS), choices=list(TILE_WIDTHS),
                    help="tile widths to time")
    ap.add_argument("--cluster", type=int, choices=[0, 1], default=1,
                    help="also time the 2x1-cluster configuration (cluster_m=2)")
    timing.add_timing_option(ap)
    ap.add_argument("--commit", help="commit measured (default: git rev-parse HEAD)")
    ap.add_argument("--dirty", choices=["0", "1"], help="uncommitted changes (default: git status)")
    ap.add_argument("--out", default=None, help="result file (default bench/results/<device>-gemm.json)")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = jax.devices()[0]
    commit, dirty = timing.git_state(ROOT)
    commit = args.commit or commit
    dirty = bool(int(args.dirty)) if args.dirty is not None else dirty
    timing_name, measure = timing.timing_of(args, device)
    variants = {"xla": jnp.dot}
    for n in args.tiles:
        for name, kw in args.orders:
            variants[f"sm90_128x{n}_{name}"] = lambda a, w, n=n, kw=kw: gemm(a, w, tile_n=n, **kw)
    if args.cluster:
        # 2x1 clusters, B multicast (128x128 only).
        for name, kw in args.orders:
            variants[f"sm90_128x128_{name}_c2"] = lambda a, w, kw=kw: gemm(a, w, tile_n=128, cluster_m=2, **kw)
    rows_out = []
    print(f"{'dtype':9s} {'M':>5s} {'N':>6s} {'K':>6s}  {'xla ms':>8s}  " +
          "  ".join(f"{v:>24s}" for v in variants if v != "xla") + "  best/xla")
    for dname in args.dtype:
        dtype = DTYPES[dname]
        for m in args.rows:
            for n, k in SHAPES:
                ka, kw = jax.random.split(jax.random.key(m + n + k))
                a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
                w = (jax.random.normal(kw, (k, n), jnp.float32) / k ** 0.5).astype(dtype)
                flops = 2.0 * m * n * k
                iters = timing.iterations_for(flops / (ESTIMATE_TFLOPS * 1e9))
                carry = (a, jnp.zeros((m, n), dtype))
                timed = {name: (timing.chained(step_for(fn), iters), (carry, w), iters)
                         for name, fn in variants.items()}
                ms = timing.alternate(timed, rounds=args.rounds, measure=measure)
                ref = jnp.dot(a.astype(jnp.float32), w.astype(jnp.float32))
                errs = {}
                for name, fn in variants.items():
                    got = jax.jit(fn)(a, w).astype(jnp.float32)
                    errs[name] = float(jnp.linalg.norm(got - ref) / jnp.linalg.norm(ref))
                best = min((v for v in ms if v != "xla"), key=ms.get)
                row = dict(dtype=dname, m=m, n=n, k=k, flops=flops,
                           ms={v: round(t, 5) for v, t in ms.items()},
                           tflops={v: round(flops / (t * 1e9), 1) for v, t in ms.items()},
                           rel_err={v: float(f"{e:.3g}") for v, e in errs.items()},
                           best=best, best_over_xla=round(ms["xla"] / ms[best], 3))
                rows_out.append(row)
                print(f"{dname:9s} {m:5d} {n:6d} {k:6d}  {ms['xla']:8.4f}  " +
                      "  ".join(f"{ms[v]:18.4f} ({row['tflops'][v]:3.0f})" for v in variants if v != "xla") +
                      f"  {row['best_over_xla']:.3f}", flush=True)

    out = pathlib.Path(args.out) if args.out else ROOT / "bench" / "results" / f"{timing.device_slug(device)}-gemm.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(
        what="GEMM alone: a [M, K] @ w [K, N], the MLP's shapes; ms = median time per call",
        device=device.device_kind, jax=jax.__version__, commit=commit, dirty=dirty, timing=timing_name,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        rounds=args.rounds, results=rows_out), indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
