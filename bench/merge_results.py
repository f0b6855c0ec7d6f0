"""Merges result files of one benchmark that ran in parts (one device call
each: a whole conv sweep takes longer than a call may run) into one file.

    python bench/merge_results.py OUT.json PART.json [PART.json ...]

The parts must describe the same measurement: the same commit, dirty flag,
device, jax, timing and every other top-level field but the date (the merged
file keeps the latest). Their rows are concatenated. A case (a shape, dtype
and batch or token count: every row field but the impl and what was measured)
has all its rows from one part, since its rows are compared with each other
and were timed in alternated rounds of one run; a case in two parts is an
error, not a silent choice between them.
"""
from __future__ import annotations

import json
import pathlib
import sys

# Fields that name a row's case in bench/conv.py, mlp.py, model.py and tp.py results.
CASE_FIELDS = ("layer", "model", "hidden", "ffn", "out", "activation", "dtype", "batch", "tokens", "gpus")


def case_of(row: dict) -> tuple:
    return tuple((k, row[k]) for k in CASE_FIELDS if k in row)


def merge(parts: list) -> dict:
    """One result from several parts of the same measurement (see above)."""
    if not parts:
        raise ValueError("no result files to merge")
    first = parts[0]
    fixed = {k: v for k, v in first.items() if k not in ("rows", "date")}
    rows, seen, impls = [], {}, set()
    for i, part in enumerate(parts):
        if "rows" not in part:
            raise ValueError(f"part {i + 1} has no rows (bench/gemm.py results are one run each)")
        other = {k: v for k, v in part.items() if k not in ("rows", "date")}
        if other != fixed:
            diff = sorted(k for k in set(other) | set(fixed) if other.get(k) != fixed.get(k))
            raise ValueError(f"part {i + 1} is another measurement than part 1: they differ in "
                             + ", ".join(f"{k} ({fixed.get(k)!r} against {other.get(k)!r})" for k in diff))
        for row in part["rows"]:
            case = case_of(row)
            if seen.setdefault(case, i) != i:
                raise ValueError(f"case {dict(case)} is in part {seen[case] + 1} and part {i + 1}")
            if (case, row.get("impl")) in impls:
                raise ValueError(f"part {i + 1} has two {row.get('impl')!r} rows of case {dict(case)}")
            impls.add((case, row.get("impl")))
            rows.append(row)
    dates = [p["date"] for p in parts if "date" in p]
    return {**fixed, **({"date": max(dates)} if dates else {}), "rows": rows}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, *paths = (pathlib.Path(a) for a in args)
    merged = merge([json.loads(p.read_text()) for p in paths])
    out.write_text(json.dumps(merged, indent=1) + "\n")
    print(f"wrote {out}: {len(merged['rows'])} rows from {len(paths)} parts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
