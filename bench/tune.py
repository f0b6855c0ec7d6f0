"""Writes the tuned table policy="auto" reads (cusync_jax/tuned/<device>-mlp.json
or <device>-conv.json) from bench/mlp.py or bench/conv.py results: per case
the fastest of xla, serial and every policy/mode row. A synced row must beat
XLA by MARGIN to be chosen; otherwise the case falls back to XLA's ops.

    python bench/tune.py bench/results/h200-mlp.json [more MLP results]
    python bench/tune.py bench/results/h200-conv.json [more conv results]

Several results of one kind (runs of other rows or repeats, same kernels)
merge per case: the fastest row of any of them against XLA's fastest time in
any of them. Only device-timed conv results (bench/conv.py --timing device)
are judged; the cases of loop-timed ones fall back to XLA. A row whose
check against XLA's output failed (bench/checks.py) is never picked, nor
any row of its implementation at that layer or model in that run.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import checks  # noqa: E402
import conv  # noqa: E402
from cusync_jax import tuning  # noqa: E402
from mlp import MODELS  # noqa: E402

# Within noise of XLA is not a reason to run our kernels.
MARGIN = 1.01


def parse_plan(text: str) -> tuple:
    """'128x128x64 cluster 2x1 RowSync fused grouped:4' ->
    ([128, 128, 64], 'RowSync', 'fused', 'grouped', 4, 2, [False, False], 'auto') (the
    cluster part is optional: 1); 'A/B' for two tiles gives [A, B] (producer,
    consumer); a trailing 'stream-K 1/2' names the GEMMs that ran stream-K,
    and a last 'mma=<schedule>' the 128x128 tiles' MMA schedule (else auto).
    Results written before the order was printed ran row-major unless they
    named another order."""
    tile_text, *words = text.split(" ")
    mma_schedule = "auto"
    if words and words[-1].startswith("mma="):
        mma_schedule = words.pop()[len("mma="):]
    tiles = [[int(v) for v in t.split("x")] for t in tile_text.split("/")]
    tile = tiles[0] if len(tiles) == 1 else tiles
    stream_k = [False, False]
    if "stream-K" in words:
        at = words.index("stream-K")
        for gemm in words[at + 1].split("/"):
            stream_k[int(gemm) - 1] = True
        words = words[:at]
    cluster_m = 1
    if words[:1] == ["cluster"]:
        cluster_m = int(words[1].split("x")[0])
        words = words[2:]
    policy, mode, *order = words
    name, _, band = (order[0] if order else "row_major").partition(":")
    return tile, policy, mode, name, int(band) if band else 8, cluster_m, stream_k, mma_schedule


def shape_of(row: dict) -> dict:
    if "hidden" in row:
        return {k: row[k] for k in ("hidden", "ffn", "out", "activation")}
    hidden, ffn, activation = MODELS[row["model"]]
    return dict(hidden=hidden, ffn=ffn, out=hidden, activation=activation)


def refused(result: dict) -> set:
    """(layer or model, dtype, impl) of the rows a result's check found
    wrong (bench/checks.py): such a row is wrong at every size of its layer
    or model in that run, checked or not, and never picked."""
    return {(r.get("layer", r.get("model")), r["dtype"], r["impl"]) for r in result["rows"] if checks.is_wrong(r)}


def entries(results: list) -> list:
    """One entry per (model, dtype, tokens) over MLP results: the fastest row
    of ours in any of them against XLA's shortest time in any of them (both at
    their best, as conv_entries: a case that wins in one run because XLA ran
    slow there and loses in the next is no win)."""
    cases = {}
    for result in results:
        wrong = refused(result)
        for r in result["rows"]:
            if (r["model"], r["dtype"], r["impl"]) not in wrong:
                cases.setdefault((r["model"], r["dtype"], r["tokens"]), []).append(r)
    out = []
    for (model, dtype, tokens), rows in sorted(cases.items()):
        xla = min(r["ms"] for r in rows if r["impl"] == "xla")
        # (Rows with launch options, e.g. serial@overlap=1, are left out: the
        # table names a plan by tile, policy, mode and order only, so it would
        # replay them without the option.)
        ours = min((r for r in rows if r["impl"] not in ("xla", "auto") and " overlap" not in r.get("plan", "")),
                   key=lambda r: r["ms"], default=None)
        entry = dict(shape_of(rows[0]), dtype=dtype, tokens=tokens)
        # The fastest of many noisy rows against one XLA median favours luck:
        # the winner must also beat XLA round by round (its paired ratio).
        if ours and xla / ours["ms"] >= MARGIN and ours.get("over_xla_paired", MARGIN) >= MARGIN:
            tile, policy, mode, order, band, cluster_m, stream_k, mma_schedule = parse_plan(ours["plan"])
            entry.update(impl=ours["impl"], policy=policy, mode=mode, tile=tile, order=order,
                         group_rows=band, cluster_m=cluster_m, stream_k=stream_k, mma_schedule=mma_schedule)
        else:
            entry.update(impl="xla", policy=None, mode="xla", tile=None, order=None, group_rows=8,
                         cluster_m=1, stream_k=[False, False], mma_schedule="auto")
        entry["speedup_over_xla"] = round(xla / ours["ms"], 3) if ours else None
        out.append(entry)
    return out


def conv_entries(results: list) -> list:
    """One entry per (layer, dtype, batch) over conv results: the row with the
    shortest time in any of them, with plan_conv_pair's arguments for it
    (bench/conv.py plan_kwargs), judged against XLA's shortest time in any of
    them. Both at their best: the GPU's state differs between runs, and the
    largest ratio over runs would pick the run where XLA was slow.

    Only device-timed results (bench/conv.py --timing device) are judged. A
    loop-timed one counted XLA's host gaps between cuDNN calls as XLA's time
    (bench/device_time.py); its cases are listed, falling back to XLA, with
    no speedup."""
    xla, ours, cases = {}, {}, set()
    for result in results:
        trusted = result.get("timing") == "device"
        wrong = refused(result)
        for r in result["rows"]:
            case = (r["layer"], r["dtype"], r["batch"])
            cases.add(case)
            if not trusted or (r["layer"], r["dtype"], r["impl"]) in wrong:
                continue
            if r["impl"] == "xla":
                xla[case] = min(xla.get(case, float("inf")), r["ms"])
            elif r["impl"] != "auto" and (case not in ours or r["ms"] < ours[case][0]):
                ours[case] = (r["ms"], r["impl"])
    best = {case: (xla[case] / ours[case][0], ours[case][1]) if case in ours and case in xla else (None, None)
            for case in cases}
    out = []
    for (layer, dtype, batch), (speedup, impl) in sorted(best.items()):
        size, c0, c1, c2 = conv.LAYERS[layer]
        entry = dict(layer=layer, height=size, width=size, channels=[c0, c1, c2], filters=[[3, 3], [3, 3]],
                     activation="relu", dtype=dtype, batch=batch)
        if speedup is not None and speedup >= MARGIN:
            kw = conv.plan_kwargs(impl, batch, size, c0, c1, c2)
            tile = kw.get("tile")
            entry.update(impl=impl, policy=kw["policy"], mode=kw["mode"],
                         tile=[list(tile), list(tile)] if tile else None, split_k=list(kw.get("split_k", (1, 1))))
        else:
            entry.update(impl="xla", policy=None, mode="xla", tile=None, split_k=[1, 1])
        entry["speedup_over_xla"] = None if speedup is None else round(speedup, 3)
        out.append(entry)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", type=pathlib.Path, nargs="+",
                    help="bench/mlp.py results (<device>-mlp.json), or bench/conv.py results")
    ap.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "cusync_jax" / "tuned")
    args = ap.parse_args(argv)
    results = [json.loads(p.read_text()) for p in args.result]
    result = results[0]
    kinds = ["conv" if "layer" in r["rows"][0] else "mlp" for r in results]
    if len(set(kinds)) > 1:
        ap.error(f"result: mixes bench/conv.py and bench/mlp.py results ({', '.join(kinds)})")
    is_conv = kinds[0] == "conv"
    # The table's cases are plain pairs or ResNet blocks, not both: a run with
    # the residual add times another epilogue.
    if is_conv and len({bool(r.get("residual")) for r in results}) > 1:
        ap.error("result: mixes conv results with and without --residual")
    if is_conv and len({r.get("out_activation", "identity") for r in results}) > 1:
        ap.error("result: mixes conv results of different --out-activation")
    if len({r["device"] for r in results}) > 1:
        ap.error("result: the results come from different devices")
    commits = [r["commit"] for r in results]
    table = {"device": result["device"], "measured_commit": commits if len(commits) > 1 or is_conv else commits[0],
             "measured_dirty": any(r["dirty"] for r in results), "date": max(r["date"] for r in results),
             "margin": MARGIN, "entries": conv_entries(results) if is_conv else entries(results)}
    if is_conv:
        table["measured_timing"] = [r.get("timing", "loop") for r in results]
        table["residual"] = bool(result.get("residual"))
        table["out_activation"] = result.get("out_activation", "identity")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    kind = ("conv-residual" if table["residual"] else "conv") if is_conv else "mlp"
    path = args.out_dir / f"{tuning.device_slug(result['device'])}-{kind}.json"
    path.write_text(json.dumps(table, indent=1) + "\n")
    wins = sum(e["impl"] != "xla" for e in table["entries"])
    print(f"wrote {path}: {len(table['entries'])} cases, {wins} run synced kernels, "
          f"{len(table['entries']) - wins} fall back to XLA")


if __name__ == "__main__":
    main()
