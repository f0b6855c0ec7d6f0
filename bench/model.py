"""Benchmark: models end to end, plain Flax against the same model with synced ops.

  gpt3-layer  examples/gpt3_layer.py: one GPU's share of a GPT-3 175B layer under
              8-way tensor parallelism (hidden 12288, 12 heads of 128, MLP 6144),
              one sequence of B tokens; synced: the MLP. Sweep B as the paper's.
  resnet38    examples/resnet38.py: ResNet-38 inference on 224x224 images, batch
              B; synced: the two convs of each of the 16 residual blocks.

The baseline is the same Flax model with nn.Dense / nn.Conv (XLA's kernels);
both run on the same parameters and inputs, and their outputs are compared
before timing. Times are device time per forward pass (bench/timing.py:
chained calls in one jitted loop, plain and synced alternated in rounds,
medians); --timing device (the default on a GPU) counts the GPU's busy time,
without the host gaps between XLA's cuDNN calls that made ResNet-38's plain
time vary by a fifth between runs.

    python bench/model.py --commit $(git rev-parse HEAD) --dirty 0
    python bench/model.py --models gpt3-layer --tokens 512 1024 --dtype bfloat16
    python bench/model.py --size small            # a quick run (CPU or GPU)

Writes bench/results/<device>-model.json:
{"commit", "dirty", "device", "jax", "timing", "date",
 "rows": [{"model", "dtype", "batch", "ms", "baseline_ms", "fallback"}]}
(batch: tokens for gpt3-layer, images for resnet38; ms: synced, baseline_ms: plain;
fallback: policy="auto" ran XLA's own ops for the synced op at this size).
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

import jax
import jax.numpy as jnp

import cusync_jax as cs

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "examples"))
import gpt3_layer  # noqa: E402
import resnet38  # noqa: E402
import timing  # noqa: E402
from example_timing import DTYPES  # noqa: E402  (the examples' dtype names)

TOKENS = (64, 128, 256, 512, 1024, 2048)
BATCHES = (1, 2, 4, 8, 16, 32)
TOLERANCE = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}


def gpt3_case(size, tokens, dtype):
    """(plain apply, synced apply, chain, params, x). chain(apply) is a step
    x -> next x of x's shape for timing.chained; it renormalizes the layer's
    output, so a chain of layers neither grows nor overflows in half precision."""
    params, x = gpt3_layer.init_params(size, 1, tokens, dtype)
    plain, synced = (gpt3_layer.GPT3Layer(size, synced=s, dtype=dtype).apply
                     for s in (False, True))

    def chain(apply):
        def step(x, params):
            y = apply(params, x).astype(jnp.float32)
            return (y * jax.lax.rsqrt(jnp.mean(y * y) + 1e-6)).astype(x.dtype)
        return step

    return plain, synced, chain, params, x


def resnet_case(size, batch, dtype):
    """(plain apply, synced apply, chain, params, images). chain(apply) feeds a
    scalar of the logits back into the images, so every pass depends on the
    one before."""
    params, images = resnet38.init_params(size, batch, dtype)
    plain, synced = (resnet38.ResNet38(size, synced=s, dtype=dtype).apply for s in (False, True))

    def chain(apply):
        def step(images, params):
            logits = apply(params, images).astype(jnp.float32)
            return (images + 1e-3 * jnp.tanh(jnp.mean(logits))).astype(images.dtype)
        return step

    return plain, synced, chain, params, images


def relative_error(plain, synced, params, x) -> float:
    """max |synced - plain| / max |plain| of the model's output."""
    want = jax.jit(plain)(params, x).astype(jnp.float32)
    got = jax.jit(synced)(params, x).astype(jnp.float32)
    return float(jnp.max(jnp.abs(got - want)) / jnp.maximum(jnp.max(jnp.abs(want)), 1e-30))


def time_case(plain_step, synced_step, x, params, rounds, measure=timing.launch_ms):
    """Median ms per forward pass of (plain, synced); measure: timing.timing_of's."""
    probe = timing.chained(plain_step, 1)
    timing.launch_ms(probe, (x, params))  # compile
    iters = timing.iterations_for(min(timing.launch_ms(probe, (x, params)) for _ in range(3)))
    variants = {name: (timing.chained(step, iters), (x, params), iters)
                for name, step in (("plain", plain_step), ("synced", synced_step))}
    ms = timing.alternate(variants, rounds, measure=measure)
    return ms["plain"], ms["synced"]


def fell_back(synced, params, x) -> bool:
    """Whether policy="auto" ran XLA's own ops for every synced op of the
    model: then none of the library's primitives is left in its program."""
    text = str(jax.make_jaxpr(synced)(params, x))
    return not any(p.name in text for p in (cs.synced_mlp_p, cs.synced_conv_pair_p))


def write_results(path, commit, dirty, device, rows, timing_name):
    result = {"commit": commit, "dirty": dirty, "device": device.device_kind,
              "jax": jax.__version__, "timing": timing_name,
              # The tables the auto plans read (CUSYNC_JAX_TUNED_DIR or the shipped ones).
              "tuned_tables": {op: cs.tuning.table_source(device.device_kind, op)
                               for op in ("mlp", "conv", "conv-residual")},
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "rows": rows}
    path.write_text(json.dumps(result, indent=1) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["gpt3-layer", "resnet38"],
                    choices=["gpt3-layer", "resnet38"])
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS),
                    help="gpt3-layer: tokens (the paper's batch B)")
    ap.add_argument("--batch", type=int, nargs="+", default=list(BATCHES),
                    help="resnet38: images per batch")
    ap.add_argument("--dtype", nargs="+", default=["float16"], choices=list(DTYPES))
    ap.add_argument("--size", choices=["paper", "small"], default="paper",
                    help="small: the examples' CPU sizes, for a quick check")
    ap.add_argument("--rounds", type=int, default=20, help="timed repetitions per variant")
    timing.add_timing_option(ap)
    ap.add_argument("--commit", help="commit measured (default: git rev-parse HEAD)")
    ap.add_argument("--dirty", choices=["0", "1"], help="uncommitted changes (default: git status)")
    ap.add_argument("--out", type=pathlib.Path,
                    help="results JSON (default bench/results/<device>-model.json)")
    args = ap.parse_args(argv)

    device = jax.devices()[0]
    commit, dirty = timing.git_state(ROOT)
    commit = args.commit or commit
    dirty = bool(int(args.dirty)) if args.dirty is not None else dirty
    timing_name, measure = timing.timing_of(args, device)
    out = args.out or ROOT / "bench" / "results" / f"{timing.device_slug(device)}-model.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    paper = args.size == "paper"
    cases = {
        "gpt3-layer": (lambda b, dt: gpt3_case(gpt3_layer.PAPER if paper else gpt3_layer.SMALL,
                                               b, dt), args.tokens),
        "resnet38": (lambda b, dt: resnet_case(resnet38.PAPER if paper else resnet38.SMALL,
                                               b, dt), args.batch),
    }

    print(f"device {device.device_kind}, jax {jax.__version__}, sizes: {args.size}")
    print(f"{'model':<12}{'dtype':<10}{'batch':>6}{'plain ms':>11}{'synced ms':>11}"
          f"{'speedup':>9}{'rel err':>10}")
    rows, failures = [], []
    for model in args.models:
        make, sweep = cases[model]
        for dtype_name in args.dtype:
            for batch in sweep:
                plain, synced, chain, params, x = make(batch, DTYPES[dtype_name])
                err = relative_error(plain, synced, params, x)
                if not err < TOLERANCE[dtype_name]:
                    failures.append(f"{model} {dtype_name} {batch}: relative error {err:.3g}")
                plain_ms, synced_ms = time_case(chain(plain), chain(synced), x, params, args.rounds, measure)
                rows.append(dict(model=model, dtype=dtype_name, batch=batch,
                                 ms=round(synced_ms, 5), baseline_ms=round(plain_ms, 5),
                                 fallback=fell_back(synced, params, x)))
                print(f"{model:<12}{dtype_name:<10}{batch:>6}{plain_ms:>11.4f}{synced_ms:>11.4f}"
                      f"{plain_ms / synced_ms:>9.3f}{err:>10.2e}", flush=True)
                # Written after every case: a run cut short keeps what it measured.
                write_results(out, commit, dirty, device, rows, timing_name)
    print(f"\nwrote {out}")
    if failures:
        sys.exit("synced and plain outputs differ:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
