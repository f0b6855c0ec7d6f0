"""Writes the tuned table policy="auto" reads (cusync_jax/tuned/<device>-mlp.json)
from a bench/mlp.py result: per case the fastest of xla, serial and every
policy/mode row. A synced row must beat XLA by MARGIN to be chosen; otherwise
the case falls back to XLA's ops.

    python bench/tune.py bench/results/h200-mlp.json
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
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


def entries(result: dict) -> list:
    cases = {}
    for r in result["rows"]:
        cases.setdefault((r["model"], r["dtype"], r["tokens"]), []).append(r)
    out = []
    for (model, dtype, tokens), rows in sorted(cases.items()):
        xla = next(r["ms"] for r in rows if r["impl"] == "xla")
        ours = min((r for r in rows if r["impl"] not in ("xla", "auto")), key=lambda r: r["ms"])
        entry = dict(shape_of(rows[0]), dtype=dtype, tokens=tokens)
        if xla / ours["ms"] >= MARGIN:
            tile, policy, mode, order, band, cluster_m, stream_k, mma_schedule = parse_plan(ours["plan"])
            entry.update(impl=ours["impl"], policy=policy, mode=mode, tile=tile, order=order,
                         group_rows=band, cluster_m=cluster_m, stream_k=stream_k, mma_schedule=mma_schedule)
        else:
            entry.update(impl="xla", policy=None, mode="xla", tile=None, order=None, group_rows=8,
                         cluster_m=1, stream_k=[False, False], mma_schedule="auto")
        entry["speedup_over_xla"] = round(xla / ours["ms"], 3)
        out.append(entry)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", type=pathlib.Path, help="a bench/mlp.py result (<device>-mlp.json)")
    ap.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "cusync_jax" / "tuned")
    args = ap.parse_args(argv)
    result = json.loads(args.result.read_text())
    table = {"device": result["device"], "measured_commit": result["commit"],
             "measured_dirty": result["dirty"], "date": result["date"], "margin": MARGIN,
             "entries": entries(result)}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / args.result.name
    path.write_text(json.dumps(table, indent=1) + "\n")
    wins = sum(e["impl"] != "xla" for e in table["entries"])
    print(f"wrote {path}: {len(table['entries'])} cases, {wins} run synced kernels, "
          f"{len(table['entries']) - wins} fall back to XLA")


if __name__ == "__main__":
    main()
