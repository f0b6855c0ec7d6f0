"""Benchmark: the synced MLP against XLA and the StreamSync baseline, on one GPU.

Models (per GPU of 8-way tensor parallelism, as in the paper):
  gpt3   hidden 12288, ffn 6144, GELU
  llama  hidden 8192, SwiGLU with 2 x 2816 (w1 = [gate | up])
Rows per (model, dtype, tokens): xla (jax.nn ops, jitted), serial (our
kernels in stream order: StreamSync), every policy that applies in the streams
and fused modes, and auto (the planner's choice). Times are per call
(bench/timing.py: chained calls in one jitted loop, variants alternated in
rounds, medians): with --timing loop (the default) the launch's wall time, with
--timing device the GPU's busy time in it.

    python bench/mlp.py --commit $(git rev-parse HEAD) --dirty 0
    python bench/mlp.py --models gpt3 --tokens 1024 2048 --dtype float16
    python bench/mlp.py --hidden 4096 --ffn 2048 --activation gelu --tokens 512

Writes bench/results/<device>-mlp.json and a plot beside it, and prints the
table with speedups over xla and over serial.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax as cs
from cusync_jax.policies import policy_name

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import checks  # noqa: E402
import timing  # noqa: E402
from orders import parse_tile_order  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS = {"gpt3": (12288, 6144, "gelu"), "llama": (8192, 2816, "swiglu")}
TOKENS = (256, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096)
DTYPES = {"float16": jnp.float16, "bfloat16": jnp.bfloat16}
# Matrix rate used only to pick how many calls one timed launch chains.
ESTIMATE_TFLOPS = 300.0


def variants(activation: str, orders=()):
    """impl name -> plan_mlp keyword arguments (None: the XLA row). Each extra
    tile order adds serial, the fused policies and RowSync-streams in that
    order ("@order")."""
    # serial-sk: stream-K where the planner's rule says it pays (cusync/stream_k.h).
    out = {"xla": None, "serial": dict(mode="serial"), "serial-sk": dict(mode="serial", stream_k="auto")}
    policies = [cs.TileSync(), cs.RowSync()]
    if activation == "swiglu":
        policies.append(cs.StridedSync(2))
    for policy in policies:
        for mode in ("streams", "fused"):
            out[f"{policy_name(policy)}-{mode}"] = dict(policy=policy, mode=mode)
    for order in orders:
        kw = order_kwargs(order)
        out[f"serial@{order}"] = dict(mode="serial", **kw)
        for policy in policies[:2]:
            out[f"{policy_name(policy)}-fused@{order}"] = dict(policy=policy, mode="fused", **kw)
        out[f"RowSync-streams@{order}"] = dict(policy=cs.RowSync(), mode="streams", **kw)
    out["auto"] = {}
    return out


def make_inputs(tokens, hidden, ffn, activation, dtype, seed):
    """Random operands; w2 is scaled so y has x's spread, which keeps a chain
    of calls (y feeding the next x) away from zeros and overflow."""
    slices = 2 if activation == "swiglu" else 1
    ks = jax.random.split(jax.random.key(seed), 5)
    x = jax.random.normal(ks[0], (tokens, hidden), jnp.float32)
    w1 = jax.random.normal(ks[1], (hidden, slices * ffn), jnp.float32) / np.sqrt(hidden)
    w2 = jax.random.normal(ks[2], (ffn, hidden), jnp.float32) / np.sqrt(ffn)
    b1 = jax.random.normal(ks[3], (slices * ffn,), jnp.float32) * 0.1
    b2 = jax.random.normal(ks[4], (hidden,), jnp.float32) * 0.1
    y = cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation)
    scale = float(jnp.std(x) / jnp.std(y))
    cast = lambda a: a.astype(dtype)
    return cast(x), cast(w1), cast(w2 * scale), cast(b1), cast(b2 * scale)


def over_weight_sets(step, sets: int):
    """A step through `sets` MLPs in a row, each with its own weights (the
    flat parameters: sets x (w1, w2, b1, b2)), as a model's layers run: a
    call's weights are not still in L2 from its previous call."""
    if sets == 1:
        return step

    def chain(v, *flat):
        for j in range(sets):
            v = step(v, *flat[4 * j:4 * j + 4])
        return v
    return chain


def step_for(kwargs, activation, plan):
    if kwargs is None:
        return lambda x, w1, w2, b1, b2: cs.mlp_reference(x, w1, w2, b1=b1, b2=b2,
                                                          activation=activation, precision=None)
    return lambda x, w1, w2, b1, b2: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, activation=activation,
                                                   plan=plan)


FALLBACK = "xla (fallback)"


def order_kwargs(text: str) -> dict:
    """A variant spec -> plan_mlp keyword arguments. Comma-separated parts: a
    tile order ('grouped:4' -> order="grouped", group_rows=4; 'column_major'),
    'tile=128x64x64' (or 'tile=128x96x64/128x192x64', a tile per GEMM), 'cluster=2' (cluster_m), 'overlap=1' (serial's consumer
    launched as a programmatic dependent of the producer; overlap=0 is the default),,
    'mma=pingpong' or 'mma=cooperative' (mma_schedule of whole 128x128 and 96x128 tiles), 'sk=11' (stream-K for
    the producer and the consumer GEMM, serial rows only; sk=10 the producer alone)."""
    kw = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if eq and key == "tile":
            # 'tile=128x96x64/128x192x64': one tile per GEMM (serial and streams rows)
            shapes = [cs.TileShape(*(int(v) for v in t.split("x"))) for t in value.split("/")]
            if len(shapes) > 2:
                raise ValueError(f"tile: expected one tile or two joined by '/', got {value!r}")
            kw["tile"] = shapes[0] if len(shapes) == 1 else tuple(shapes)
        elif eq and key == "cluster":
            kw["cluster_m"] = int(value)
        elif eq and key == "overlap":
            kw["optimizations"] = cs.Optimizations(overlap_launches=bool(int(value)))
        elif eq and key == "sk":
            # sk=PC: stream-K for the producer (P) and consumer (C), 1 or 0 each (serial mode only)
            if len(value) != 2 or set(value) - {"0", "1"}:
                raise ValueError(f"sk: expected two digits 0/1 (producer, consumer), got {value!r}")
            kw["stream_k"] = (value[0] == "1", value[1] == "1")
        elif eq and key == "mma":
            if value not in cs.planner.MMA_SCHEDULES:
                raise ValueError(f"mma: expected one of {cs.planner.MMA_SCHEDULES}, got {value!r}")
            kw["mma_schedule"] = value
        elif eq:
            raise ValueError(f"unknown variant part {part!r}")
        else:
            kw.update(parse_tile_order(part, cs.planner.TILE_ORDERS))
    return kw


def order_text(plan) -> str:
    band = f":{plan.group_rows}" if plan.order2 == "grouped" and plan.group_rows != 8 else ""
    return plan.order2 + band


def describe(plan) -> str:
    if plan.fallback:
        return FALLBACK
    t1, t2 = plan.tile1, plan.tile2
    tile = t1.text + ("" if t1 == t2 else f"/{t2.text}")
    cluster = f" cluster {plan.cluster_m}x1" if plan.cluster_m > 1 else ""
    sk = "".join(str(i + 1) for i, on in enumerate(plan.stream_k) if on)
    stream_k = f" stream-K {'/'.join(sk)}" if sk else ""
    mma = f" mma={plan.mma_schedule}" if plan.mma_schedule != "auto" else ""
    # (The tuned table cannot replay launch options: bench/tune.py skips such rows.)
    overlap = " overlap" if plan.optimizations.overlap_launches else ""
    return f"{tile}{cluster} {policy_name(plan.policy)} {plan.mode} {order_text(plan)}{stream_k}{mma}{overlap}"


def run_case(model, hidden, ffn, activation, dtype_name, tokens, rounds, seed, device,
             orders=(), skip=(), target_ms=timing.TARGET_MS, measure=timing.launch_ms, heat_s=0.0,
             check=False, weight_sets=1):
    dtype = DTYPES[dtype_name]
    ops = make_inputs(tokens, hidden, ffn, activation, dtype, seed)
    # More weight sets: sets x (w1, w2, b1, b2) after x, the first set's own.
    for j in range(1, weight_sets):
        ops += make_inputs(tokens, hidden, ffn, activation, dtype, seed + 1000 * j)[1:]
    flops = 2 * tokens * hidden * ffn * (2 if activation == "swiglu" else 1) + 2 * tokens * ffn * hidden
    iters = timing.iterations_for(weight_sets * flops / (ESTIMATE_TFLOPS * 1e9), target_ms=target_ms)
    timed, plans, steps = {}, {}, {}
    for impl, kwargs in variants(activation, orders).items():
        if impl in skip:
            continue
        plan = None
        if kwargs is not None:
            try:
                plan = cs.plan_mlp(tokens, hidden, ffn, activation=activation, device=device,
                                   dtype=dtype_name, **kwargs).plan
            except ValueError as e:
                if "@" not in impl:
                    raise
                print(f"  skipping {impl}: {e}")  # e.g. cluster=2 has no SwiGLU form
                continue
            plans[impl] = describe(plan)
        steps[impl] = step_for(kwargs, activation, plan)
        timed[impl] = (timing.chained(over_weight_sets(steps[impl], weight_sets), iters), ops,
                       iters * weight_sets)
    errs = {}
    if check:  # each row's output against XLA's, before any is timed (bench/checks.py)
        errs = checks.check(steps, ops[:5])
        checks.report(errs, dtype_name, f"{model} tokens={tokens}")
    samples = {}
    ms = timing.alternate(timed, rounds, samples_out=samples, measure=measure, heat_s=heat_s)
    shape = dict(hidden=hidden, ffn=ffn, out=hidden, activation=activation)
    # Per-round times too: over_xla_paired, the median over rounds of xla / impl
    # within one round, cancels the drift of the GPU's clocks between rounds.
    return [dict(model=model, dtype=dtype_name, tokens=tokens, impl=impl, ms=round(t, 5),
                 over_xla_paired=round(timing.paired_ratio(samples["xla"], samples[impl]), 4),
                 rounds_ms=[round(v, 5) for v in samples[impl]],
                 **({"plan": plans[impl]} if impl in plans else {}),
                 **({"fallback": plans[impl] == FALLBACK} if impl == "auto" else {}),
                 **({"rel_err": float(f"{errs[impl]:.3g}")} if impl in errs else {}), **shape)
            for impl, t in ms.items()]


def print_case(rows):
    by = {r["impl"]: r["ms"] for r in rows}
    r0 = rows[0]
    print(f"\n{r0['model']} {r0['dtype']} tokens={r0['tokens']}")
    print(f"  {'impl':<30}{'ms':>9}{'vs xla':>9}{'paired':>8}{'vs serial':>11}  plan")
    for r in rows:
        paired = r.get("over_xla_paired", float("nan"))
        print(f"  {r['impl']:<30}{r['ms']:>9.4f}{by['xla'] / r['ms']:>9.3f}{paired:>8.3f}"
              f"{by['serial'] / r['ms']:>11.3f}  {r.get('plan', '')}")


def is_synced(row) -> bool:
    """A row that ran the synchronized kernels (auto may have chosen stream
    order or XLA's ops)."""
    if row["impl"] == "xla" or row["impl"].startswith("serial"):
        return False
    return not (row["impl"] == "auto" and (row.get("fallback") or "serial" in row["plan"].split()))


def summary(rows):
    """Best synced variant per case, against serial and xla; auto against
    the best of everything it could have picked (xla included)."""
    print("\nbest synced variant per case (speedup over serial / over xla); auto / best choice")
    cases = sorted({(r["model"], r["dtype"], r["tokens"]) for r in rows})
    for case in cases:
        rs = [r for r in rows if (r["model"], r["dtype"], r["tokens"]) == case]
        by = {r["impl"]: r["ms"] for r in rs}
        best = min((r for r in rs if is_synced(r)), key=lambda r: r["ms"], default=None)
        choice = min(r["ms"] for r in rs if r["impl"] != "auto")
        auto = next((r for r in rs if r["impl"] == "auto"), None)
        text = (f"{best['impl']:<24}{by['serial'] / best['ms']:6.3f}x {by['xla'] / best['ms']:6.3f}x"
                if best else f"{'(none)':<38}")
        if auto:
            text += f"   auto {choice / auto['ms']:5.3f} of best ({auto['plan']})"
        print(f"  {case[0]:<7}{case[1]:<10}{case[2]:>6}  {text}")
    ratios = best_over_xla(rows)
    if ratios:
        geomean = math.exp(sum(math.log(v) for v in ratios.values()) / len(ratios))
        print(f"best of ours (serial included) over xla: geomean {geomean:.3f}, "
              f"{sum(v >= 1.0 for v in ratios.values())} of {len(ratios)} cases at or above 1.00")


def best_over_xla(rows) -> dict:
    """(model, dtype, tokens) -> xla's time over the fastest of our rows (any
    mode, serial included; not auto, which may be XLA itself)."""
    out = {}
    for case in sorted({(r["model"], r["dtype"], r["tokens"]) for r in rows}):
        rs = [r for r in rows if (r["model"], r["dtype"], r["tokens"]) == case]
        ours = [r["ms"] for r in rs if r["impl"] not in ("xla", "auto")]
        xla = [r["ms"] for r in rs if r["impl"] == "xla"]
        if ours and xla:
            out[case] = xla[0] / min(ours)
    return out


def plot(rows, path: pathlib.Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(r["model"], r["dtype"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (model, dtype) in zip(axes[0], panels):
        rs = [r for r in rows if r["model"] == model and r["dtype"] == dtype]
        tokens = sorted({r["tokens"] for r in rs})
        xla = {r["tokens"]: r["ms"] for r in rs if r["impl"] == "xla"}
        impls = [i for i in dict.fromkeys(r["impl"] for r in rs) if i != "xla"]
        for impl in impls:
            ms = {r["tokens"]: r["ms"] for r in rs if r["impl"] == impl}
            style = "k--" if impl == "serial" else ("-o" if impl == "auto" else "-")
            # A variant a plan refuses at some token counts (e.g. a forced
            # mma_schedule where the tiles are not 128x128) leaves gaps.
            ax.plot(range(len(tokens)), [xla[t] / ms[t] if t in ms else float("nan") for t in tokens], style,
                    label=impl,
                    linewidth=2 if impl in ("serial", "auto") else 1, markersize=4)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(range(len(tokens)), [str(t) for t in tokens], rotation=45)
        ax.set_xlabel("tokens")
        ax.set_ylabel("speedup over XLA")
        ax.set_title(f"{model} MLP, {dtype}")
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def order_arg(text: str) -> str:
    try:
        order_kwargs(text)
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
    return text


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--hidden", type=int, help="custom shape instead of --models")
    ap.add_argument("--ffn", type=int, help="custom shape: ffn per slice")
    ap.add_argument("--activation", default="gelu", help="custom shape: activation")
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    ap.add_argument("--dtype", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    ap.add_argument("--rounds", type=int, default=20, help="timed repetitions per variant (>= 20)")
    ap.add_argument("--target-ms", type=float, default=timing.TARGET_MS,
                    help="device time of one timed launch (more: less of the launch's own cost per call)")
    ap.add_argument("--timing", choices=("loop", "device"), default="loop",
                    help="loop (the default): a launch's wall time, as every committed MLP result; "
                         "device: the GPU's busy time in it (bench/device_time.py). Both XLA and ours "
                         "pay the loop's host gaps here (about 15-20 us a call at 256 tokens), unlike "
                         "the conv pair, where only XLA's cuDNN calls left the GPU idle")
    ap.add_argument("--variants", "--orders", dest="orders", nargs="*", default=[], type=order_arg,
                    help="extra variants to time (serial and fused, both GEMMs), each a tile order "
                         "(row_major, column_major, grouped or grouped:<band rows>) and/or "
                         "tile=<m>x<n>x<k>, cluster=2, overlap=1, mma=pingpong|cooperative, sk=11 (stream-K, serial), comma-separated: "
                         "grouped:4,tile=128x64x64")
    ap.add_argument("--skip", nargs="*", default=[],
                    help="variants to leave out (names as printed, e.g. TileSync-streams); xla, serial "
                         "and auto always run")
    ap.add_argument("--weight-sets", type=int, default=1,
                    help="MLPs a chained call runs, each with its own weights (default 1: the same "
                         "weights every call). More than 1 keeps a call's weights out of L2 from the "
                         "call before, as in a model of many layers)")
    ap.add_argument("--heat-s", type=float, default=0.0,
                    help="seconds each variant runs back to back before each of its timed launches: "
                         "times it at the power cap a serving or training loop runs at (default 0: "
                         "short alternated rounds)")
    checks.add_check_option(ap, "model's first token count")
    ap.add_argument("--commit", help="commit measured (default: git rev-parse HEAD)")
    ap.add_argument("--dirty", choices=["0", "1"], help="uncommitted changes (default: git status)")
    ap.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench" / "results",
                    help="writes <device>-mlp.json and .png here (default bench/results)")
    args = ap.parse_args(argv)
    if args.weight_sets < 1:
        ap.error(f"--weight-sets: expected at least 1, got {args.weight_sets}")
    if {"xla", "serial", "auto"} & set(args.skip):
        ap.error("--skip: xla, serial and auto are the references every case needs")

    if (args.hidden is None) != (args.ffn is None):
        ap.error("--hidden and --ffn go together")
    models = ({"custom": (args.hidden, args.ffn, args.activation)} if args.hidden
              else {m: MODELS[m] for m in args.models})
    device = jax.devices()[0]
    # Plans for the device measured (its tuned table, its SM count).
    planner_device = cs.planner.device_model(device) if device.platform == "gpu" else "h200"
    commit, dirty = timing.git_state(ROOT)
    commit = args.commit or commit
    dirty = bool(int(args.dirty)) if args.dirty is not None else dirty
    out = args.out_dir / f"{timing.device_slug(device)}-mlp.json"
    _, measure = timing.timing_of(args, device)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write(rows):
        result = {"commit": commit, "dirty": dirty, "device": device.device_kind,
                  "jax": jax.__version__,
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "target_ms": args.target_ms, "timing": args.timing, "heat_s": args.heat_s,
                  "weight_sets": args.weight_sets,
                  # The table the auto rows planned from (CUSYNC_JAX_TUNED_DIR or the shipped one).
                  "tuned_table": cs.tuning.table_source(device.device_kind, "mlp"), "rows": rows}
        out.write_text(json.dumps(result, indent=1) + "\n")

    rows = []
    for dtype in args.dtype:
        for model, (hidden, ffn, activation) in models.items():
            for i, tokens in enumerate(args.tokens):
                case = run_case(model, hidden, ffn, activation, dtype, tokens, args.rounds, seed=i,
                                device=planner_device, orders=args.orders, skip=set(args.skip),
                                target_ms=args.target_ms, measure=measure, heat_s=args.heat_s,
                                check=checks.wanted(args.check, i), weight_sets=args.weight_sets)
                print_case(case)
                rows.extend(case)
                write(rows)  # after every case: a run cut short keeps what it measured
                sys.stdout.flush()
    plot(rows, out.with_suffix(".png"))
    summary(rows)
    print(f"\nwrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
