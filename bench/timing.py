"""Device timing shared by the benchmarks.

A variant is timed as one jitted lax.fori_loop of `iters` chained calls
(each call's output is the next call's input, so every call reads fresh data
and XLA can neither hoist nor drop a call), launched once per repetition; the
wall time of a launch, after block_until_ready, divided by `iters`, is the
device time of one call plus 1/iters of one dispatch (or, with
device_time.busy_ms as the measure, the GPU's busy time in the launch: XLA's
host gaps between kernels do not count). The variants of one case
are timed in alternating rounds (A B C A B C ...) so that the GPU's slowing
under sustained load spreads over all of them, and each reports its median.
"""
from __future__ import annotations

import math
import statistics
import subprocess
import time
from typing import Callable, Dict, Optional, Sequence

import jax

import device_time


def chained(step: Callable, iters: int) -> Callable:
    """jit(x -> step applied `iters` times)."""

    @jax.jit
    def run(x, *params):
        return jax.lax.fori_loop(0, iters, lambda _, v: step(v, *params), x)

    return run


# Device time of one timed launch. Its dispatch and final sync (about 250 us
# on the H200) are spread over the calls it chains: at 3 ms, GPT-3's MLP at
# 768 tokens chained 4 calls and each carried 65 us of it, 15 % of XLA's time,
# which pulled every ratio towards 1 (bench/NOTES_sm90.md, stop 14).
TARGET_MS = 12.0


def iterations_for(estimate_ms: float, target_ms: float = TARGET_MS, lo: int = 5, hi: int = 400) -> int:
    """Calls per launch so that a launch takes about target_ms."""
    return int(min(hi, max(lo, math.ceil(target_ms / max(estimate_ms, 1e-3)))))


def launch_ms(fn: Callable, args: Sequence) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) * 1e3


def heat(fn: Callable, args: Sequence, seconds: float) -> int:
    """Launches fn back to back (no sync between) for about `seconds`; returns
    how many. A GPU held busy that long settles at its power cap, where time
    follows energy per call rather than the speed of one launch
    (bench/NOTES_sm90.md, stop 28)."""
    t0, n, out = time.perf_counter(), 0, None
    while time.perf_counter() - t0 < seconds:
        out = fn(*args)
        n += 1
        if n % 8 == 0:
            jax.block_until_ready(out)  # a bounded queue, so the clock measures the GPU
    if out is not None:
        jax.block_until_ready(out)
    return n


def alternate(variants: Dict[str, tuple], rounds: int, warmup: int = 2,
              samples_out: Optional[Dict[str, list]] = None,
              measure: Callable[[Callable, Sequence], float] = launch_ms,
              heat_s: float = 0.0) -> Dict[str, float]:
    """variants: name -> (chained fn, args, iters). Returns name -> median ms per call;
    samples_out, if given, receives each variant's per-round times (round r of
    every variant ran in the same pass, so ratios of same-round samples cancel
    the GPU's slow drifts: see paired_ratio). measure: ms of one launch
    (launch_ms, its wall time; device_time.busy_ms, the GPU's busy time).
    heat_s: each timed launch follows heat_s seconds of the same variant back
    to back (see heat), so every variant is timed at its own steady state."""
    for fn, args, _ in variants.values():
        for _ in range(warmup):
            launch_ms(fn, args)
    samples = {name: [] for name in variants}
    names = list(variants)
    for r in range(rounds):
        # Rotate the starting variant too, so none is always first after a pause.
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, args, iters = variants[name]
            if heat_s > 0:
                heat(fn, args, heat_s)
            samples[name].append(measure(fn, args) / iters)
    if samples_out is not None:
        samples_out.update(samples)
    return {name: statistics.median(v) for name, v in samples.items()}


def add_timing_option(ap) -> None:
    """--timing device|loop for a benchmark's argument parser (resolve with timing_of)."""
    ap.add_argument("--timing", choices=("device", "loop"), default=None,
                    help="device (the default on a GPU): the GPU's busy time in a launch "
                         "(bench/device_time.py, CUPTI through torch); loop (the default elsewhere): "
                         "the launch's wall time, which counts XLA's host gaps between its kernels")


def timing_of(args, device) -> tuple:
    """(name, measure) of the --timing option: measure(fn, args) -> ms of one launch."""
    name = args.timing or ("device" if device.platform == "gpu" else "loop")
    return name, device_time.busy_ms if name == "device" else launch_ms


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median over rounds of a[r] / b[r]: how much faster b ran than a, paired
    by round."""
    return statistics.median(x / y for x, y in zip(a, b))


def git_state(root) -> tuple:
    """(commit, dirty) of the checkout at root, or ("unknown", None) outside git."""
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        # (Benchmark output is not a change to what is measured.)
        dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", ".",
                                     ":(exclude)bench/results", ":(exclude)bench/logs"],
                                    capture_output=True, text=True, check=True).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", None


def device_slug(device) -> str:
    """'NVIDIA H200' -> 'h200'."""
    kind = device.device_kind.lower().replace("nvidia", "").strip()
    return kind.split()[0].replace(" ", "-") if kind else device.platform
