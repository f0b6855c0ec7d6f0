"""GPU busy time of one launch: the union of the intervals in which one of
its kernels, memsets or copies ran, from CUPTI through torch.profiler (the GPU
machine has torch; nothing here is a package dependency).

    python bench/device_time.py    # on a GPU: busy against wall time on XLA alone

checks it: a ResNet conv pair at batch 1 (busy well under the wall time: XLA's
host gaps) and a large matmul (busy about the wall time), and the profiler's
event list against the exported trace on one launch each.

Why not the launch's wall time (timing.launch_ms): XLA's loop of a conv pair
leaves the GPU idle between its thunks. On the H200, a ResNet 56x56x64 pair
at batch 1 keeps the GPU busy 13.8 us a call of a 60.8 us call
(bench/logs/h200-timeline-conv-2009edc.log): the wall time counts XLA's host
work, not its convolutions. Ours launch back to back, so the wall time
favoured them by the difference. Busy time counts what ran on the GPU, and
overlapping work (two streams, a kernel started early by a programmatic
launch) once.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Callable, Iterable, Optional, Sequence, Tuple

import jax

CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")


def union_us(intervals: Iterable[Tuple[float, float]]) -> float:
    """Total length of the union of (start, duration) intervals, in their unit."""
    total, end = 0.0, None
    for start, dur in sorted(intervals):
        stop = start + dur
        if end is None or start > end:
            total += dur
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def gpu_events(fn: Callable, args: Sequence, trace_path: Optional[str] = None, host: bool = False) -> list:
    """Runs one launch of fn(*args) under the profiler and returns the GPU's
    kernel, memset and copy events in it (chrome-trace dicts: name, ts, dur
    in us), by start time. trace_path: keep the trace there; host: record the
    host's events too (in the kept trace)."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError as e:
        raise RuntimeError("device timing needs torch (CUPTI through torch.profiler); "
                           "time with --timing loop where torch is missing") from e
    torch.cuda.init()
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if host else [])
    with profile(activities=activities) as prof:
        torch.cuda.synchronize()
        jax.block_until_ready(fn(*args))
    if trace_path is None:
        # The profiler's own event list, without writing and parsing a trace
        # file (a timed sweep profiles thousands of launches); the exported
        # trace below is the fallback, and what a kept trace needs anyway.
        events = _kineto_events(prof)
        if events:
            return events
    path = trace_path
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        if trace_path is None:
            os.remove(path)
    return sorted((e for e in events if e.get("cat") in CATEGORIES), key=lambda e: e["ts"])


def _kineto_events(prof) -> list:
    """The GPU events of a finished profile as chrome-trace-like dicts (ts
    and dur in us), from torch's kineto results; [] where that API is missing."""
    try:
        raw = prof.profiler.kineto_results.events()
        events = [{"name": e.name(), "cat": e.activity_type(), "ts": e.start_ns() / 1e3,
                   "dur": e.duration_ns() / 1e3} for e in raw]
    except AttributeError:
        return []
    return sorted((e for e in events if e["cat"] in CATEGORIES), key=lambda e: e["ts"])


def busy_ms(fn: Callable, args: Sequence) -> float:
    """ms the GPU was busy running one launch of fn(*args)."""
    events = gpu_events(fn, args)
    if not events:
        raise RuntimeError("device timing saw no GPU activity in the launch (is the profiler seeing the GPU?)")
    return union_us((e["ts"], e["dur"]) for e in events) / 1e3


def _check() -> None:
    """The self-check of the module docstring (XLA alone, no package build)."""
    import jax.numpy as jnp
    import timing

    dn = ("NHWC", "HWIO", "NHWC")
    reps = 200
    for size, c in ((56, 64), (7, 512)):
        x = jax.random.normal(jax.random.key(0), (1, size, size, c), jnp.float16)
        k = (jax.random.normal(jax.random.key(1), (3, 3, c, c), jnp.float32) / (3 * c ** 0.5)).astype(jnp.float16)

        def pair(v, k=k):
            y = jax.nn.relu(jax.lax.conv_general_dilated(v, k, (1, 1), "SAME", dimension_numbers=dn))
            return jax.lax.conv_general_dilated(y, k, (1, 1), "SAME", dimension_numbers=dn)
        loop = jax.jit(lambda x: jax.lax.fori_loop(0, reps, lambda _, v: pair(v), x)[0, 0, 0, 0])
        loop(x).block_until_ready()
        for _ in range(3):
            print(f"conv pair {size}x{size}x{c} b1: wall {timing.launch_ms(loop, (x,)) / reps * 1e3:.1f} us, "
                  f"busy {busy_ms(loop, (x,)) / reps * 1e3:.1f} us a pair", flush=True)
        listed = gpu_events(loop, (x,))
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            exported = gpu_events(loop, (x,), trace_path=path)
        finally:
            os.remove(path)
        busy = lambda evs: union_us((e["ts"], e["dur"]) for e in evs) / reps  # noqa: E731
        print(f"  event list: {len(listed)} events, busy {busy(listed):.1f} us a pair; exported trace: "
              f"{len(exported)} events, busy {busy(exported):.1f} us a pair", flush=True)
    a = jax.random.normal(jax.random.key(2), (8192, 8192), jnp.float16)
    mm = timing.chained(lambda v: v @ a, 20)
    mm(a).block_until_ready()
    for _ in range(2):
        print(f"8192^3 matmul: wall {timing.launch_ms(mm, (a,)) / 20:.3f} ms, busy {busy_ms(mm, (a,)) / 20:.3f} ms")


if __name__ == "__main__":
    _check()
