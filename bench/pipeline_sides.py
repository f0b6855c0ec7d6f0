"""Joins scripts/pipeline_sides.sh's logs into one table per timing mode: for
each shape and kernel, the whole GEMM's time, its loads alone and its MMA
alone (rows `NAME`, `NAME~loads`, `NAME~mma` of the probe build's `sides`
mode), the whole over the slower side (1.00: the sides overlap perfectly) and
over the MMA alone, and cuBLAS's time on the shape.

    python bench/pipeline_sides.py OUTDIR [--kernels own128_grouped ...]
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import re

HEADER = re.compile(r"^-- .*\(HARNESS_BACK_TO_BACK=(\d)\)")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+([\d.]+) ms")
KERNELS = ["own128coop_column", "own128_grouped", "own192_grouped", "own256_grouped", "own96_column",
           "own128_c2_column", "own256_c2_column"]


def parse(paths) -> dict:
    """{(back_to_back, (m, n, k), kernel): {"full" | "loads" | "mma": ms}}."""
    table = collections.defaultdict(dict)
    for path in paths:
        b2b = "0"
        for line in pathlib.Path(path).read_text().splitlines():
            if h := HEADER.match(line):
                b2b = h.group(1)
            elif r := ROW.match(line):
                shape = tuple(int(r.group(i)) for i in (1, 2, 3))
                kernel, _, side = r.group(4).partition("~")
                table[(b2b, shape, kernel)][side or "full"] = float(r.group(5))
    return table


def cell(kernel: str, t: dict) -> str:
    us = "/".join(f"{t[s] * 1e3:.1f}" if s in t else "-" for s in ("full", "loads", "mma"))
    # Loads alone can run slower than whole (CTAs unpaced by the MMA drift and lose
    # the order's L2 reuse), so the whole over the MMA alone is printed as well.
    over = (f" ({t['full'] / max(t['loads'], t['mma']):.2f}, {t['full'] / t['mma']:.2f})"
            if {"full", "loads", "mma"} <= t.keys() else "")
    return f"{kernel} {us}{over}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=pathlib.Path)
    ap.add_argument("--kernels", nargs="*", default=KERNELS)
    args = ap.parse_args(argv)
    table = parse(sorted(args.outdir.glob("sides*.log")))
    for b2b, title in (("1", "back to back, per launch"), ("0", "one launch after an idle GPU")):
        shapes = sorted({s for (b, s, k) in table if b == b2b and k in args.kernels})
        if not shapes:
            continue
        print(f"\n{title}: us whole / loads alone / MMA alone (whole over the slower side, over the MMA alone); cuBLAS, CUTLASS pp128")
        for shape in shapes:
            ref = [table.get((b2b, shape, k), {}).get("full") for k in ("cublas_torch", "cutlass_pp128_c1")]
            head = "%5d %5d %5d  cuBLAS %s CUTLASS %s" % (*shape, *(f"{v * 1e3:.1f}" if v else "-" for v in ref))
            print(head)
            print("     " + " | ".join(cell(k, table[(b2b, shape, k)]) for k in args.kernels
                                       if (b2b, shape, k) in table))


if __name__ == "__main__":
    main()
