"""Joins scripts/pipeline_sides.sh's logs into one table per timing mode:
for each shape and kernel, the full GEMM's time, its loads alone (_nomma)
and its MMA alone (_noload), and cuBLAS's time on the shape.

    python bench/pipeline_sides.py OUTDIR [--kernels own128coop_column ...]
"""
from __future__ import annotations

import argparse
import collections
import pathlib
import re

HEADER = re.compile(r"^-- (\S+).*\(HARNESS_BACK_TO_BACK=(\d)\)")
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+([\d.]+) ms")
SIDES = {"": "full", "_nomma": "loads", "_noload": "mma"}


def parse(paths) -> dict:
    """{(back_to_back, (m, n, k), kernel): {side: ms}}; cuBLAS rows under side 'full'."""
    table = collections.defaultdict(dict)
    for path in paths:
        side, b2b = "full", "0"
        for line in pathlib.Path(path).read_text().splitlines():
            if h := HEADER.match(line):
                binary, b2b = h.group(1), h.group(2)
                suffix = re.sub(r".*gemm_vs_cutlass", "", binary) if "gemm_vs_cutlass" in binary else ""
                side = SIDES.get(suffix, "full")
            elif r := ROW.match(line):
                shape = tuple(int(r.group(i)) for i in (1, 2, 3))
                table[(b2b, shape, r.group(4))][side] = float(r.group(5))
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=pathlib.Path)
    ap.add_argument("--kernels", nargs="*", default=["own128coop_column", "own128_column", "own192_column",
                                                      "own96_column", "own128_c2_column", "own192_streamk"])
    args = ap.parse_args(argv)
    table = parse(sorted(args.outdir.glob("*.log")))
    for b2b, title in (("0", "one launch after an idle GPU"), ("1", "back to back, per launch")):
        shapes = sorted({s for (b, s, _) in table if b == b2b})
        if not shapes:
            continue
        print(f"\n{title}: us full / loads alone / MMA alone; cuBLAS")
        for shape in shapes:
            cublas = table.get((b2b, shape, "cublas_torch"), {}).get("full")
            cells = []
            for kernel in args.kernels:
                t = table.get((b2b, shape, kernel))
                if t:
                    cells.append(f"{kernel.replace('_column', '')} " +
                                 "/".join(f"{t[s] * 1e3:.1f}" if s in t else "-" for s in ("full", "loads", "mma")))
            head = "%5d %5d %5d" % shape
            print(f"{head}  cuBLAS {cublas * 1e3:.1f}" if cublas else head, " | ".join(cells))


if __name__ == "__main__":
    main()
