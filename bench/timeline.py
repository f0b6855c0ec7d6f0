"""Kernel timeline of the MLP as bench/mlp.py times it: one chained-loop launch
(10 calls) per variant, every kernel, memset and copy with its device time,
recorded by CUPTI through torch.profiler inside the JAX process (the GPU
machine has torch; nothing here is a package dependency).

    python bench/timeline.py TOKENS [MODEL] TRACE.json [--iters N] [--heat SECONDS]
    python bench/timeline.py conv LAYER BATCH TRACE.json [--rows ROW ...] [--iters N] [--heat SECONDS]

(one trace per variant: TRACE-<variant>.json). The conv form times a conv
pair of bench/conv.py's LAYERS as bench/conv.py loops it; its rows are
bench/conv.py's row names (default: xla, sm90-serial, sm90-serial@split,
sm90-RowSync-fused).

Prints, per variant, the device time per call, the busy time, each kernel's
mean duration (and its mean over the launch's first and last tenth: a kernel
that slows down within a long launch is being clocked down) and the gaps
between consecutive events (bench/logs/h200-timeline-*.log). Where a
variant's per-call time exceeds the sum of its kernels, something between
them costs (launch gaps, copies).

--heat SECONDS: before its profiled launch each variant runs back to back for
SECONDS, so the launch sees the clocks of sustained load (the H200 holds its
700 W cap by lowering clocks within a fraction of a second, as in
bench/mlp.py's rounds), not those of a GPU that idled while the program compiled.
"""
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import conv
import cusync_jax as cs
import device_time
import mlp
import timing

ITERS = 10  # calls in the profiled launch (--iters)
VARIANTS = {"xla": None, "serial128": dict(mode="serial", tile=cs.TileShape(128, 128, 64)),
            "serial": dict(mode="serial"),
            "serial-overlap": dict(mode="serial", optimizations=cs.Optimizations(overlap_launches=True)),
            "serial-sk": dict(mode="serial", stream_k="auto"),
            # The first GEMM on 96-row tiles (tokens as N), the second on 128x128.
            "serial-tok96": dict(mode="serial", tile=(cs.TileShape(96, 128, 64), cs.TileShape(128, 128, 64))),
            # The same with both GEMMs' MMA form forced to pingpong (the first
            # GEMM's form before the cooperative 96x128 tile existed).
            "serial-tok96-pingpong": dict(mode="serial", tile=(cs.TileShape(96, 128, 64), cs.TileShape(128, 128, 64)),
                                          mma_schedule="pingpong"),
            "rowsync_fused": dict(mode="fused", policy=cs.RowSync()),
            "rowsync_streams": dict(mode="streams", policy=cs.RowSync())}


def short_name(name: str) -> str:
    """A kernel's name, the chain kernel's cut to its configuration (tile
    width, SwiGLU, cluster, stream-K), so each GEMM's kernel has a line."""
    if "ChainConfig<" in name:
        return "chain_kernel_sm90<" + name.split("ChainConfig<", 1)[1].split(">", 1)[0] + ">"
    return name[:70]


CONV_ROWS = ("xla", "sm90-serial", "sm90-serial@split", "sm90-RowSync-fused")


def take_option(argv, flag, convert, default, many=False):
    """(value of --flag, argv without it); many: every word up to the next flag."""
    if flag not in argv:
        return default, argv
    at = argv.index(flag)
    end = at + 2
    if many:
        while end < len(argv) and not argv[end].startswith("--"):
            end += 1
    values = [convert(v) for v in argv[at + 1:end]]
    return (values if many else values[0]), argv[:at] + argv[end:]


def mlp_variants(argv, iters):
    """name -> (jitted launch of `iters` chained calls, its inputs), for the MLP form."""
    tokens, model = int(argv[0]), (argv[1] if len(argv) > 2 else "gpt3")
    hidden, ffn, act = mlp.MODELS[model]
    ops = mlp.make_inputs(tokens, hidden, ffn, act, jnp.float16, 0)
    out = {}
    for name, kw in VARIANTS.items():
        plan = None if kw is None else cs.plan_mlp(tokens, hidden, ffn, activation=act, dtype="float16",
                                                   **kw).plan
        print(name, plan)
        out[name] = (timing.chained(mlp.step_for(kw, act, plan), iters), ops)
    return out


def conv_variants(argv, iters, rows):
    """The same for a conv pair: bench/conv.py's rows, looped as bench/conv.py loops them."""
    layer, batch = argv[1], int(argv[2])
    size, c0, c1, c2 = conv.LAYERS[layer]
    ops = conv.inputs(batch, size, c0, c1, c2, jnp.float16)
    fns = conv.implementations(extra=[r for r in rows if r not in conv.impl_names(hopper=True)],
                               hopper=True)
    out = {}
    for name in rows:
        print(name, conv.plan_kwargs(name, batch, size, c0, c1, c2))
        out[name] = (conv.looped(fns[name], iters), ops)
    return out


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    iters, argv = take_option(argv, "--iters", int, ITERS)
    heat, argv = take_option(argv, "--heat", float, 0.0)
    rows, argv = take_option(argv, "--rows", str, list(CONV_ROWS), many=True)
    trace = argv[-1]
    variants = conv_variants(argv, iters, rows) if argv[0] == "conv" else mlp_variants(argv, iters)
    for f, ops in variants.values():
        for _ in range(3):
            jax.block_until_ready(f(*ops))
    per_variant = []
    for name, (f, ops) in variants.items():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < heat:
            jax.block_until_ready(f(*ops))
        path = trace.replace(".json", f"-{name}.json") if trace.endswith(".json") else f"{trace}-{name}"
        per_variant.append(device_time.gpu_events(f, ops, trace_path=path, host=True))
    for name, g in zip(variants, per_variant):
        span = max(e["ts"] + e["dur"] for e in g) - g[0]["ts"]
        busy = sum(e["dur"] for e in g)
        union = device_time.union_us((e["ts"], e["dur"]) for e in g)
        print(f"== {name}: {len(g)} events, span {span:.1f} us = {span / iters:.1f} us/iter, "
              f"busy {busy / iters:.1f} us/iter (overlaps once: {union / iters:.1f})")
        per = collections.OrderedDict()
        for e in g:
            per.setdefault(short_name(e["name"]), []).append(e["dur"])
        for k, d in per.items():
            tenth = max(1, len(d) // 10)
            print(f"   {len(d):3d} x {sum(d) / len(d):8.2f} us (first tenth {sum(d[:tenth]) / tenth:.2f}, "
                  f"last {sum(d[-tenth:]) / tenth:.2f})  {k}")
        gaps = [g[i + 1]["ts"] - (g[i]["ts"] + g[i]["dur"]) for i in range(len(g) - 1)]
        mid = len(g) // 2  # one call from the middle of the launch, event by event
        for e, gap in zip(g[mid:mid + max(1, len(g) // iters)], gaps[mid:]):
            print(f"     {e['dur']:8.2f} us, then a {gap:5.1f} us gap  {short_name(e['name'])}")
        print("   gaps (us) first 12:", " ".join(f"{x:.1f}" for x in gaps[:12]))
        print(f"   gaps after the first 12: sum {sum(gaps[12:]) / iters:.1f} us/iter, "
              f"largest {max(gaps[12:], default=0):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
