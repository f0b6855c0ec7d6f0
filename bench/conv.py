"""Benchmark: synced conv pairs (ResNet-38's layer pairs, VGG-19's) against
XLA (cuDNN) and the StreamSync baseline, on one GPU.

Rows per (layer, batch): xla (lax.conv_general_dilated through XLA), serial
(our kernels in stream order: StreamSync), every policy in the streams and
fused modes, on a Hopper GPU the same on the Hopper conv ("sm90-...", also
split along k) and on the halo conv ("halo-...", where all channels are
multiples of 64 or the input an image), and auto (the planner's choice;
"fallback": true where it ran XLA's own convolutions). Times are device
time per call: each is the median over `rounds` launches (variants
alternated, as in bench/timing.py) of one jit that runs the op `reps` times
in a loop, divided by `reps` (the loop carries a one-element update of x so
XLA cannot hoist the op out of it).
--timing device (the default on a GPU) counts the time the GPU was busy in a launch
(bench/device_time.py); --timing loop its wall time, which for XLA includes
its host's gaps between cuDNN calls (1.7-2.8x its busy time for ResNet's pairs at batch 1).

    python bench/conv.py                      # everything, float16
    python bench/conv.py --layers resnet-56x56x64 --batches 1 8 --reps 20
    python bench/conv.py --residual --only sm90-serial   # ResNet blocks, xla and the Hopper serial rows
    python bench/conv.py --residual --out-activation relu --only halo-serial   # ResNet blocks with their last ReLU

Writes bench/results/<device>-conv.json and a plot beside it.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import pathlib
import re
import sys
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax as cs

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import checks  # noqa: E402
import timing  # noqa: E402

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
POLICIES = ("Conv2DTileSync", "TileSync", "RowSync")


MODES = ("streams", "fused")
# The CUDA conv kernel: two 256-thread CTAs per SM (44.5 KB of shared memory each).
CUDA_SLOTS = cs.H200.sms * 2


def split_for(tiles: int, k_blocks: int, slots: int) -> int:
    """Shares per tile that fill the GPU's slots once, keeping at least 4
    k-blocks per share (the CUDA kernel's pipeline is 3 deep)."""
    return max(1, min(slots // max(1, tiles), k_blocks // 4))


def hopper_split_for(tiles: int, k_blocks: int, sms: int) -> int:
    """The Hopper conv's split of a conv (stream-K over tiles x split CTAs):
    the largest divisor of its k-blocks (so an even split) that keeps the
    CTAs within one wave, at least 6 k-blocks a share (the pipeline is 6
    stages deep) and at most 8 shares (the last adds the others' fp32 sums,
    64 KB each for a 128x128 tile)."""
    fits = [s for s in range(1, min(k_blocks, 8) + 1)
            if k_blocks % s == 0 and tiles * s <= sms and k_blocks // s >= 6]
    return max(fits, default=1)


def halo_split_for(tiles: int, blocks: int, sms: int) -> int:
    """The halo conv's split of a conv along its input channel blocks: the
    largest divisor of the blocks that keeps every share on an SM of its own
    (tiles x split <= SMs); 1 where the tiles fill the GPU already."""
    return max(s for s in range(1, blocks + 1) if blocks % s == 0 and (s == 1 or tiles * s <= sms))


def hopper_runs(layer: str) -> bool:
    """Whether the Hopper conv takes a layer (mid channels a multiple of 64; an
    input of other channel counts, VGG's RGB image, runs conv 1 unfolded)."""
    return LAYERS[layer][2] % 64 == 0


def halo_runs(layer: str) -> bool:
    """Whether the halo conv takes a layer (every channel count a multiple of
    64; an input of 8 channels or fewer, VGG's RGB image, read padded to 8)."""
    c0, c1, c2 = LAYERS[layer][1:]
    return (c0 % 64 == 0 or c0 <= cs.conv_planner.PIXEL8_CHANNELS) and c1 % 64 == 0 and c2 % 64 == 0


def impl_names(split_k: bool = False, hopper: bool = False) -> list:
    """The rows timed: xla, serial (StreamSync), each policy in the streams
    and fused modes, auto; split_k: the serial and RowSync-fused pairs with
    split_for's shares ("...@split"); hopper: the Hopper conv ("sm90-...") in
    serial mode, split along k by hopper_split_for or not, and every policy
    in the streams and fused modes; and the halo conv ("halo-...") in serial
    mode, whole or split along its input channel blocks by halo_split_for,
    and every policy in the streams and fused modes."""
    synced = [f"{name}-{mode}" for name in POLICIES for mode in MODES]
    names = ["xla", "serial", *synced, "auto"]
    if hopper:
        names += ["sm90-serial", "sm90-serial@split", "sm90-serial@n64,split", *(f"sm90-{n}" for n in synced)]
        names += ["halo-serial", "halo-serial@split", *(f"halo-{n}" for n in synced)]
    if split_k:
        names += ["serial@split", "RowSync-fused@split"]
    return names


def plan_kwargs(impl: str, n: int, size: int, c0: int, c1: int, c2: int,
                filters=((3, 3), (3, 3))) -> Optional[dict]:
    """plan_conv_pair's keyword arguments (besides the shapes) for a row: None
    for xla, {} for auto (the planner's own choice). bench/tune.py stores
    what they give in the tuned table.

    A row is [sm90-|halo-]POLICY-MODE or [sm90-|halo-]serial, then optionally "@" and
    comma-separated options: "split" (the rule's shares, split_for or
    hopper_split_for), "split=AxB" (A producer and B consumer shares), "n64"
    (the Hopper conv's 128x64 tile whatever the channels)."""
    if impl == "xla":
        return None
    if impl == "auto":
        return {}
    hopper = impl.startswith("sm90-")
    halo = impl.startswith("halo-")
    name, _, variant = impl[len("sm90-") if hopper or halo else 0:].partition("@")
    policy, _, mode = ("Conv2DTileSync", "", "serial") if name == "serial" else name.partition("-")
    options = [o for o in variant.split(",") if o]
    if (policy not in POLICIES or mode not in ("serial",) + MODES
            or any(not re.fullmatch(r"split(=\d+x\d+)?|n64", o) for o in options)
            or ("n64" in options and not hopper) or (halo and "n64" in options)):
        raise ValueError(f"unknown row {impl!r}")
    kw = dict(policy=policy, mode=mode)
    conv1 = (c0, filters[0])
    if halo:
        # Its tiles cover the padded rows; a share is a run of 64-channel input blocks.
        t = cs.kernels.CONV_HALO_CONFIGS[0].tile
        kw["tile"] = (t.m, t.n, t.k)
        if c0 < cs.conv_planner.PIXEL8_CHANNELS:
            conv1 = (cs.conv_planner.PIXEL8_CHANNELS, filters[0])  # as the plan runs it: padded
        positions = cs._cusync_cpu.halo_tile_count(n, size, size, (conv1[0], c1, c2))
        tiles_of = lambda c_out: positions * (c_out // 64)  # noqa: E731
        blocks_of = lambda f, c_in: max(1, c_in // 64)  # noqa: E731 (pixel8: one block)
        rule, slots = halo_split_for, cs.H200.sms
    else:
        if hopper:
            tile = kw["tile"] = (128, 64, 64) if c1 == 64 or "n64" in options else (128, 128, 64)
            rule, slots = hopper_split_for, cs.H200.sms
        else:
            tile, rule, slots = cs.kernels.CONV_CUDA_CONFIGS[0].tile, split_for, CUDA_SLOTS
        tile = cs.TileShape(*tile) if isinstance(tile, tuple) else tile
        if hopper and cs.conv_unfold.needs_unfold(c0):
            conv1 = (cs.conv_unfold.unfolded_channels(c0, filters[0]), (1, 1))  # as the plan runs it
        tiles_of = lambda c_out: math.prod(cs.planner.grid(n * size * size, c_out, tile))  # noqa: E731
        blocks_of = lambda f, c_in: cs.conv_planner.conv_k_blocks(f, c_in, tile)  # noqa: E731
    for o in options:
        if o == "split":
            split = tuple(rule(tiles_of(c_out), blocks_of(f, c_in), slots)
                          for c_in, c_out, f in ((conv1[0], c1, conv1[1]), (c1, c2, filters[1])))
            if not (halo and split == (1, 1)):  # a whole halo row is halo-serial's (distinct drops it)
                kw["split_k"] = split
        elif o.startswith("split="):
            kw["split_k"] = tuple(int(s) for s in o[len("split="):].split("x"))
    return kw


def distinct(impls: dict, batch: int, size: int, c0: int, c1: int, c2: int) -> dict:
    """The rows that run different plans at a layer and batch
    (sm90-serial@n64,split is sm90-serial@split where the tile is 128x64
    anyway; an explicit split=AxB is the rule's split at some batches only)."""
    seen, out = [], {}
    for name, fn in impls.items():
        kw = plan_kwargs(name, batch, size, c0, c1, c2)
        if kw is None or kw == {} or kw not in seen:
            out[name] = fn
            seen.append(kw)
    return out


def implementations(split_k: bool = False, hopper: bool = False, extra=(), out_activation="identity"):
    """impl name (impl_names, then the extra rows) -> fn(x, k1, k2, b1, b2) -> y;
    out_activation applied last in every row."""
    def make(name):
        def fn(x, k1, k2, b1, b2, residual=None):
            if name == "xla":
                return cs.conv_pair_reference(x, k1, k2, b1=b1, b2=b2, residual=residual,
                                              out_activation=out_activation, precision=None)
            n, h, w, c0 = x.shape
            c1, c2 = k1.shape[3], k2.shape[3]
            kw = plan_kwargs(name, n, h, c0, c1, c2, (k1.shape[:2], k2.shape[:2]))
            if "tile" in kw or "split_k" in kw:
                # The H200's kernels by name (the plain rows plan for the device they run on).
                kw = dict(plan=cs.plan_conv_pair(n, h, w, c0, c1, c2, filter1=k1.shape[:2],
                                                 filter2=k2.shape[:2], device="h200", **kw).plan)
            return cs.synced_conv_pair(x, k1, k2, b1=b1, b2=b2, residual=residual,
                                       out_activation=out_activation, **kw)
        return fn
    return {name: make(name) for name in [*impl_names(split_k, hopper), *extra]}


def looped(fn, reps: int):
    """jit of `reps` calls in one loop, each reading all of the previous
    call's output, so XLA can neither hoist nor drop a call, nor compute
    only part of one: where y has x's shape (ResNet's pairs, VGG's from
    56x56x256 on) y is the next call's x, as in a stack of blocks; elsewhere
    every element of y feeds a sum that moves one element of x by 0 * sum."""

    @jax.jit
    def loop(x, *rest):
        def body(_, carry):
            x, acc = carry
            y = fn(x, *rest)
            if y.shape == x.shape:
                return y, acc
            acc = acc + jnp.sum(y.astype(jnp.float32))
            return x.at[0, 0, 0, 0].add((acc * 0).astype(x.dtype)), acc
        x, acc = jax.lax.fori_loop(0, reps, body, (x, jnp.float32(0)))
        return x[0, 0, 0, 0].astype(jnp.float32) + acc

    return loop


def reps_for(fn, ops, target_ms: float = timing.TARGET_MS) -> int:
    """Calls per timed launch so that one launch takes about target_ms (the
    wall time's dispatch and sync, ~250 us, spread thin), from a 10-call probe."""
    probe = looped(fn, 10)
    timing.launch_ms(probe, ops)  # compile
    return timing.iterations_for(min(timing.launch_ms(probe, ops) for _ in range(3)) / 10, target_ms)


# Busy time has no dispatch to spread: shorter launches, and fewer rounds (it
# does not move with the host's timing, only with the GPU's clocks).
DEVICE_TARGET_MS, DEVICE_ROUNDS, LOOP_ROUNDS = 2.0, 5, 20


def inputs(batch, size, c0, c1, c2, dtype, seed=0, residual=False):
    """x, k1, k2, b1, b2 (and with residual the shortcut added to y, as in a
    ResNet basic block)."""
    ks = jax.random.split(jax.random.key(seed), 6)
    x = jax.random.normal(ks[0], (batch, size, size, c0), jnp.float32)
    k1 = jax.random.normal(ks[1], (3, 3, c0, c1), jnp.float32) / np.sqrt(9 * c0)
    k2 = jax.random.normal(ks[2], (3, 3, c1, c2), jnp.float32) / np.sqrt(9 * c1)
    b1 = jax.random.normal(ks[3], (c1,), jnp.float32) * 0.1
    b2 = jax.random.normal(ks[4], (c2,), jnp.float32) * 0.1
    ops = (x, k1, k2, b1, b2) + ((jax.random.normal(ks[5], (batch, size, size, c2), jnp.float32),)
                                 if residual else ())
    return tuple(a.astype(dtype) for a in ops)


def plot(rows, path: pathlib.Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    fig, axes = plt.subplots(1, len(layers), figsize=(4 * len(layers), 3.6), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        mine = [r for r in rows if r["layer"] == layer]
        batches = sorted({r["batch"] for r in mine})
        base = {r["batch"]: r["ms"] for r in mine if r["impl"] == "xla"}
        for impl in dict.fromkeys(r["impl"] for r in mine):
            if impl == "xla":
                continue
            ms = {r["batch"]: r["ms"] for r in mine if r["impl"] == impl}
            ax.plot(batches, [base[b] / ms[b] if b in ms else float("nan") for b in batches], marker="o",
                    label=impl)
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(layer, fontsize=9)
        ax.set_xlabel("batch")
    axes[0][0].set_ylabel("speedup over XLA (cuDNN)")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--batches", nargs="+", type=int, default=list(BATCHES))
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    ap.add_argument("--reps", type=int, default=None,
                    help="op calls inside one jit (default: about timing.TARGET_MS of XLA's pair)")
    ap.add_argument("--rounds", type=int, default=None,
                    help=f"timed launches per variant, variants alternated; the median is kept "
                         f"(default {DEVICE_ROUNDS} with --timing device, {LOOP_ROUNDS} with loop)")
    ap.add_argument("--split-k", action="store_true",
                    help="also time serial and RowSync-fused with split-K shares (split_for)")
    ap.add_argument("--hopper", action=argparse.BooleanOptionalAction, default=None,
                    help="also time the Hopper conv (kernel family 1) on the layers it takes "
                         "(default: where the GPU is compute capability 9.0)")
    ap.add_argument("--residual", action="store_true",
                    help="add a residual to y (the ResNet basic block's shortcut) in every row")
    ap.add_argument("--out-activation", default="identity", choices=("identity", "relu"),
                    help="applied to y last in every row (ResNet's block: --residual --out-activation relu)")
    ap.add_argument("--only", nargs="+", default=None, metavar="PREFIX",
                    help="time only the rows whose names start with one of these (xla is always timed)")
    timing.add_timing_option(ap)
    ap.add_argument("--extra", nargs="+", default=(), metavar="ROW",
                    help="rows beyond the standard ones, e.g. sm90-serial@n64,split=12x12 (plan_kwargs)")
    checks.add_check_option(ap, "layer's first batch")
    ap.add_argument("--commit", help="commit measured (default: git rev-parse HEAD)")
    ap.add_argument("--dirty", choices=["0", "1"], help="uncommitted changes (default: git status)")
    ap.add_argument("--out", type=pathlib.Path, default=None)
    args = ap.parse_args()

    root = pathlib.Path(__file__).resolve().parent.parent
    device = jax.devices()[0]
    # (the auto row runs on the device it is timed on: on a CPU, the tile executor, which never falls back)
    planner_device = cs.planner.device_model(device) if device.platform == "gpu" else "cpu"
    out = args.out or root / "bench" / "results" / f"{timing.device_slug(device)}-conv.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    commit, dirty = timing.git_state(root)
    commit = args.commit or commit
    dirty = bool(int(args.dirty)) if args.dirty is not None else dirty
    dtype = jnp.dtype(args.dtype)
    hopper = args.hopper
    if hopper is None:
        hopper = device.platform == "gpu" and str(getattr(device, "compute_capability", "")).startswith("9")
    all_impls = implementations(args.split_k, hopper, args.extra, args.out_activation)
    args.timing, measure = timing.timing_of(args, device)
    rounds = args.rounds or (DEVICE_ROUNDS if args.timing == "device" else LOOP_ROUNDS)
    if args.only:
        all_impls = {n: f for n, f in all_impls.items()
                     if n == "xla" or n in args.extra or n.startswith(tuple(args.only))}
    rows = []
    print(f"{'layer':24s} {'batch':>5s} " + " ".join(f"{n:>22s}" for n in all_impls))
    for layer in args.layers:
        size, c0, c1, c2 = LAYERS[layer]
        layer_impls = {n: f for n, f in all_impls.items()
                       if (hopper_runs(layer) or not n.startswith("sm90-"))
                       and (halo_runs(layer) or not n.startswith("halo-"))}
        for bi, batch in enumerate(args.batches):
            impls = distinct(layer_impls, batch, size, c0, c1, c2)
            ops = inputs(batch, size, c0, c1, c2, dtype, residual=args.residual)
            errs = {}
            if checks.wanted(args.check, bi):
                errs = checks.check(impls, ops)
                checks.report(errs, dtype.name, f"{layer} batch {batch}")
            reps = args.reps or reps_for(impls["xla"], ops,
                                         DEVICE_TARGET_MS if args.timing == "device" else timing.TARGET_MS)
            ms = timing.alternate({name: (looped(fn, reps), ops, reps) for name, fn in impls.items()},
                                  rounds, measure=measure)
            fallback = cs.plan_conv_pair(batch, size, size, c0, c1, c2, device=planner_device, dtype=dtype,
                                         residual=args.residual).fallback
            rows.extend({"layer": layer, "dtype": dtype.name, "batch": batch, "impl": name,
                         "ms": round(t, 5), **({"fallback": fallback} if name == "auto" else {}),
                         **({"rel_err": float(f"{errs[name]:.3g}")} if name in errs else {})}
                        for name, t in ms.items())
            # By name: a case may time fewer rows than the header's (distinct, layer_impls).
            print(f"{layer:24s} {batch:5d} " + " ".join(f"{ms[n]:22.4f}" if n in ms else f"{'-':>22s}"
                                                        for n in all_impls),
                  flush=True)
            # After every case: a run cut short keeps what it measured.
            out.write_text(json.dumps({
                "commit": commit, "dirty": dirty, "device": device.device_kind,
                "jax": jax.__version__, "residual": args.residual, "out_activation": args.out_activation,
                "timing": args.timing,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                # The table the auto rows planned from (CUSYNC_JAX_TUNED_DIR or the shipped one).
                "tuned_table": cs.tuning.table_source(device.device_kind,
                                                      "conv-residual" if args.residual else "conv"),
                "rows": rows}, indent=1) + "\n")
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
