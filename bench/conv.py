"""Benchmark: synced conv pairs (ResNet-38's layer pairs, VGG-19's) against
XLA (cuDNN) and the StreamSync baseline, on one GPU.

Rows per (layer, batch): xla (lax.conv_general_dilated through XLA), serial
(our kernels in stream order: StreamSync), every policy in the streams and
fused modes, and auto (the planner's choice). Times are device time per call:
each is the median over several launches of one jit that runs the op `reps`
times in a loop, divided by `reps` (the loop carries a one-element update of
x so XLA cannot hoist the op out of it).

    python bench/conv.py                      # everything, float16
    python bench/conv.py --layers resnet-56x56x64 --batches 1 8 --reps 20

Writes bench/results/<device>-conv.json and a plot beside it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax as cs

# name -> (height = width, C0, C1, C2); 3x3 filters, stride 1, SAME.
LAYERS = {
    # ResNet-38 (the paper's Table): two 3x3 convs of equal channels.
    "resnet-56x56x64": (56, 64, 64, 64),
    "resnet-28x28x128": (28, 128, 128, 128),
    "resnet-14x14x256": (14, 256, 256, 256),
    "resnet-7x7x512": (7, 512, 512, 512),
    # VGG-19: consecutive convs of each block (conv1_1+1_2, 2_1+2_2, 3_2+3_3, 4_2+4_3, 5_1+5_2).
    "vgg19-224x224x3-64": (224, 3, 64, 64),
    "vgg19-112x112x64-128": (112, 64, 128, 128),
    "vgg19-56x56x256": (56, 256, 256, 256),
    "vgg19-28x28x512": (28, 512, 512, 512),
    "vgg19-14x14x512": (14, 512, 512, 512),
}
BATCHES = (1, 4, 8, 16, 32)
POLICIES = {"Conv2DTileSync": cs.Conv2DTileSync(3, 3), "TileSync": cs.TileSync(),
            "RowSync": cs.RowSync()}


def implementations():
    """impl name -> fn(x, k1, k2, b1, b2) -> y."""
    impls = {"xla": lambda x, k1, k2, b1, b2: cs.conv_pair_reference(x, k1, k2, b1=b1, b2=b2,
                                                                     precision=None),
             "serial": lambda *a: _synced(*a, policy=cs.Conv2DTileSync(3, 3), mode="serial")}
    for name, policy in POLICIES.items():
        for mode in ("streams", "fused"):
            impls[f"{name}-{mode}"] = (lambda p, m: lambda *a: _synced(*a, policy=p, mode=m))(
                policy, mode)
    impls["auto"] = lambda *a: _synced(*a)
    return impls


def _synced(x, k1, k2, b1, b2, **kw):
    return cs.synced_conv_pair(x, k1, k2, b1=b1, b2=b2, **kw)


def device_ms(fn, args, reps: int, launches: int) -> float:
    """Median device time of one call, in ms."""

    @jax.jit
    def loop(x, *rest):
        def body(_, carry):
            x, acc = carry
            y = fn(x, *rest)
            acc = acc + y[0, 0, 0, 0].astype(jnp.float32)
            # Depend on the previous iteration at the cost of one element.
            return x.at[0, 0, 0, 0].add((acc * 0).astype(x.dtype)), acc
        return jax.lax.fori_loop(0, reps, body, (x, jnp.float32(0)))[1]

    jax.block_until_ready(loop(*args))  # compile and warm up
    times = []
    for _ in range(launches):
        t = time.perf_counter()
        jax.block_until_ready(loop(*args))
        times.append((time.perf_counter() - t) / reps * 1e3)
    return statistics.median(times)


def inputs(batch, size, c0, c1, c2, dtype, seed=0):
    ks = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(ks[0], (batch, size, size, c0), jnp.float32)
    k1 = jax.random.normal(ks[1], (3, 3, c0, c1), jnp.float32) / np.sqrt(9 * c0)
    k2 = jax.random.normal(ks[2], (3, 3, c1, c2), jnp.float32) / np.sqrt(9 * c1)
    b1 = jax.random.normal(ks[3], (c1,), jnp.float32) * 0.1
    b2 = jax.random.normal(ks[4], (c2,), jnp.float32) * 0.1
    return tuple(a.astype(dtype) for a in (x, k1, k2, b1, b2))


def git_state(root: pathlib.Path):
    def git(*a):
        return subprocess.run(["git", *a], cwd=root, capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))


def device_slug() -> str:
    kind = jax.devices()[0].device_kind.lower()
    for known in ("h200", "h100", "a100", "v100"):
        if known in kind:
            return known
    return kind.replace("nvidia", "").strip().replace(" ", "-") or "device"


def plot(rows, path: pathlib.Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    fig, axes = plt.subplots(1, len(layers), figsize=(4 * len(layers), 3.6), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        mine = [r for r in rows if r["layer"] == layer]
        batches = sorted({r["batch"] for r in mine})
        base = {r["batch"]: r["ms"] for r in mine if r["impl"] == "serial"}
        for impl in dict.fromkeys(r["impl"] for r in mine):
            if impl == "serial":
                continue
            ms = {r["batch"]: r["ms"] for r in mine if r["impl"] == impl}
            ax.plot(batches, [base[b] / ms[b] for b in batches], marker="o", label=impl)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(layer, fontsize=9)
        ax.set_xlabel("batch")
    axes[0][0].set_ylabel("speedup over serial (StreamSync)")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--batches", nargs="+", type=int, default=list(BATCHES))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--reps", type=int, default=50, help="op calls inside one jit")
    ap.add_argument("--launches", type=int, default=5, help="timed launches; the median is kept")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    args = ap.parse_args()

    root = pathlib.Path(__file__).resolve().parent.parent
    out = args.out or root / "bench" / "results" / f"{device_slug()}-conv.json"
    dtype = jnp.dtype(args.dtype)
    impls = implementations()
    rows = []
    print(f"{'layer':24s} {'batch':>5s} " + " ".join(f"{n:>22s}" for n in impls))
    for layer in args.layers:
        size, c0, c1, c2 = LAYERS[layer]
        for batch in args.batches:
            ops = inputs(batch, size, c0, c1, c2, dtype)
            line = []
            for name, fn in impls.items():
                ms = device_ms(fn, ops, args.reps, args.launches)
                rows.append({"layer": layer, "dtype": dtype.name, "batch": batch, "impl": name,
                             "ms": round(ms, 5)})
                line.append(f"{ms:22.4f}")
            print(f"{layer:24s} {batch:5d} " + " ".join(line), flush=True)

    commit, dirty = git_state(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "commit": commit, "dirty": dirty, "device": jax.devices()[0].device_kind,
        "jax": jax.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "rows": rows}, indent=1))
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
