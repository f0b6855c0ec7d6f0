"""Where a kernel's warps stall, per SASS instruction, from Nsight Compute's
source page (`ncu ... --page source --print-source sass --csv`): per profiled
kernel, the static opcode counts and the most-sampled instructions with their
top stall reasons; with --mark, the samples of each region of the code.

    python bench/ncu_top.py FILE.csv [--top 30] [--mark NAME=REGEX ...]

A mark starts its region at the first instruction, at or after the previous
mark's, whose SASS matches REGEX; code before the first mark is "start".
scripts/ncu_gemm.sh and scripts/ncu_halo.sh run it on their profiles.
"""
from __future__ import annotations

import argparse
import collections
import csv
import re


def num(v) -> float:
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0


def tables(lines: list) -> list:
    """(title, rows) of each kernel's source table (one CSV header each)."""
    starts = [i for i, line in enumerate(lines) if line.startswith('"') and '"Source"' in line]
    out = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        title = next((lines[j] for j in range(start - 1, max(-1, start - 6), -1) if lines[j].strip()), "")
        out.append((title, [r for r in csv.DictReader(lines[start:end]) if r.get("Source")]))
    return out


def regions(rows: list, samp: str, marks: list) -> list:
    """[(name, samples)] of the regions the marks cut the code into, in address order."""
    bounds, at = [], 0
    for name, pattern in marks:
        rx = re.compile(pattern)
        hit = next((i for i in range(at, len(rows)) if rx.search(rows[i]["Source"])), None)
        if hit is None:
            continue  # a mark that never matches is left out, its samples stay with the region before
        bounds.append((hit, name))
        at = hit + 1
    cuts = [(0, "start")] + bounds + [(len(rows), None)]
    return [(name, sum(num(r[samp]) for r in rows[lo:hi]))
            for (lo, name), (hi, _) in zip(cuts, cuts[1:]) if hi > lo]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--mark", action="append", default=[], metavar="NAME=REGEX")
    args = ap.parse_args(argv)
    marks = []
    for m in args.mark:
        name, sep, pattern = m.partition("=")
        if not sep:
            ap.error(f"--mark takes NAME=REGEX; got {m!r}")
        marks.append((name, pattern))
    lines = open(args.csv, errors="replace").read().splitlines()
    found = tables(lines)
    if not found:
        print("no source table; the file begins:\n" + "\n".join(lines[:20]))
        return
    for n, (title, rows) in enumerate(found):
        cols = list(rows[0].keys()) if rows else []
        samp = next((c for c in cols if "Stall Sampling (All" in c), None) or next(
            (c for c in cols if "Sampling" in c), None)
        if samp is None:
            print("columns:", cols)
            continue
        stalls = [c for c in cols if c.startswith("stall_") and "Not Issued" not in c]
        total = sum(num(r[samp]) for r in rows) or 1.0
        # Opcode of each instruction, its predicate ("@P0") and modifiers dropped.
        ops = collections.Counter(
            next((w for w in r["Source"].split() if not w.startswith("@")), "").split(".")[0] for r in rows)
        print(f"== kernel {n}: {title[:160]}")
        print(f"{len(rows)} instructions, column {samp!r}, {total:.0f} samples")
        print("static opcode counts:", " ".join(f"{k}:{v}" for k, v in ops.most_common(25)))
        # Executed warp instructions per opcode, where the profile counted them
        # (--section SourceCounters): what the kernel issues, not what it holds.
        if "Instructions Executed" in cols:
            executed = collections.Counter()
            for r in rows:
                op = next((w for w in r["Source"].split() if not w.startswith("@")), "").split(".")[0]
                executed[op] += num(r["Instructions Executed"])
            done = sum(executed.values()) or 1.0
            print(f"executed warp instructions: {done:.4g};",
                  " ".join(f"{k}:{100 * v / done:.1f}%" for k, v in executed.most_common(12)))
        if marks:
            print("samples by region:")
            for name, s in regions(rows, samp, marks):
                print(f"  {name:<24} {s:7.0f} {100 * s / total:6.1f}%")
        print(f"top {args.top}:")
        for r in sorted(rows, key=lambda r: -num(r[samp]))[:args.top]:
            why = sorted(((num(r[c]), c[len("stall_"):]) for c in stalls), reverse=True)[:2]
            reasons = ", ".join(f"{c} {v:.0f}" for v, c in why if v > 0)
            print(f"{100 * num(r[samp]) / total:6.2f}%  {r.get('Address', ''):>8}  {r.get('Source', '').strip()[:70]}"
                  f"  [{reasons}]")


if __name__ == "__main__":
    main()
