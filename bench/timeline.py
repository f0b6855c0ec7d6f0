"""Kernel timeline of the MLP as bench/mlp.py times it: one chained-loop launch
(10 calls) per variant, every kernel, memset and copy with its device time,
recorded by CUPTI through torch.profiler inside the JAX process (the GPU
machine has torch; nothing here is a package dependency).

    python bench/timeline.py TOKENS [MODEL] TRACE.json [--iters N] [--heat SECONDS]

(one trace per variant: TRACE-<variant>.json)

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
import time
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import torch
from torch.profiler import ProfilerActivity, profile

import cusync_jax as cs
import mlp
import timing

ITERS = 10  # calls in the profiled launch (--iters)
VARIANTS = {"xla": None, "serial128": dict(mode="serial", tile=cs.TileShape(128, 128, 64)),
            "serial": dict(mode="serial"),
            "serial-overlap": dict(mode="serial", optimizations=cs.Optimizations(overlap_launches=True)),
            "serial-sk": dict(mode="serial", stream_k="auto"),
            "rowsync_fused": dict(mode="fused", policy=cs.RowSync()),
            "rowsync_streams": dict(mode="streams", policy=cs.RowSync())}


def short_name(name: str) -> str:
    """A kernel's name, the chain kernel's cut to its configuration (tile
    width, SwiGLU, cluster, stream-K), so each GEMM's kernel has a line."""
    if "ChainConfig<" in name:
        return "chain_kernel_sm90<" + name.split("ChainConfig<", 1)[1].split(">", 1)[0] + ">"
    return name[:70]


def main(argv):
    iters, heat = ITERS, 0.0
    if "--iters" in argv:
        at = argv.index("--iters")
        iters, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    if "--heat" in argv:
        at = argv.index("--heat")
        heat, argv = float(argv[at + 1]), argv[:at] + argv[at + 2:]
    tokens, model, trace = int(argv[0]), (argv[1] if len(argv) > 2 else "gpt3"), argv[-1]
    hidden, ffn, act = mlp.MODELS[model]
    ops = mlp.make_inputs(tokens, hidden, ffn, act, jnp.float16, 0)
    fns = {}
    for name, kw in VARIANTS.items():
        plan = None if kw is None else cs.plan_mlp(tokens, hidden, ffn, activation=act, dtype="float16",
                                                   **kw).plan
        print(name, plan)
        fns[name] = timing.chained(mlp.step_for(kw, act, plan), iters)
        for _ in range(3):
            jax.block_until_ready(fns[name](*ops))
    torch.cuda.init()
    per_variant = []
    for name, f in fns.items():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < heat:
            jax.block_until_ready(f(*ops))
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            torch.cuda.synchronize()
            jax.block_until_ready(f(*ops))
        path = trace.replace(".json", f"-{name}.json") if trace.endswith(".json") else f"{trace}-{name}"
        prof.export_chrome_trace(path)
        per_variant.append(sorted((e for e in json.load(open(path))["traceEvents"]
                                   if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")),
                                  key=lambda e: e["ts"]))
    for name, g in zip(fns, per_variant):
        span = g[-1]["ts"] + g[-1]["dur"] - g[0]["ts"]
        busy = sum(e["dur"] for e in g)
        print(f"== {name}: {len(g)} events, span {span:.1f} us = {span / iters:.1f} us/iter, "
              f"busy {busy / iters:.1f} us/iter")
        per = collections.OrderedDict()
        for e in g:
            per.setdefault(short_name(e["name"]), []).append(e["dur"])
        for k, d in per.items():
            tenth = max(1, len(d) // 10)
            print(f"   {len(d):3d} x {sum(d) / len(d):8.2f} us (first tenth {sum(d[:tenth]) / tenth:.2f}, "
                  f"last {sum(d[-tenth:]) / tenth:.2f})  {k}")
        gaps = [g[i + 1]["ts"] - (g[i]["ts"] + g[i]["dur"]) for i in range(len(g) - 1)]
        print("   gaps (us) first 12:", " ".join(f"{x:.1f}" for x in gaps[:12]))
        print(f"   gaps after the first 12: sum {sum(gaps[12:]) / iters:.1f} us/iter, "
              f"largest {max(gaps[12:], default=0):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
