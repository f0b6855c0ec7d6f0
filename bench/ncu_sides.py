"""The table of scripts/ncu_sides.sh: per shape and kernel, ncu's time, cycles,
the tensor pipe's share of the elapsed cycles, L2 and DRAM bytes, instructions,
and the sections' throughputs, the pipe sides whole / ~loads / ~mma side by side.

    python bench/ncu_sides.py OUTDIR
"""
from __future__ import annotations

import pathlib
import re
import sys

HEADER = re.compile(r"^\s*(?:void )?(\S+?)[<(].*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)")
METRIC = re.compile(r"^\s+([a-z_]+__[\w.]+)\s+(\S+)\s+([\d,.]+)\s*$")
SECTION_ROW = re.compile(r"^\s+(Duration|SM Frequency|Elapsed Cycles|L1/TEX Cache Throughput|L2 Cache Throughput|"
                         r"Compute \(SM\) Throughput|Warp Cycles Per Issued Instruction)\s+(\S+)\s+([\d,.]+)\s*$")
PIPE = re.compile(r"(\w+) is the highest-utilized pipeline \(([\d.]+)%\)")
NAME_LINE = re.compile(r"^\s*\d+\s+\d+\s+\d+\s+(\S+)\s+[\d.]+ ms")
# ncu scales its units per value; the table prints us, MB and cycles.
SCALE = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "Tbyte": 1e6}


def blocks(text: str, pattern: re.Pattern) -> list[dict]:
    """One dict per profiled kernel: its name, then what `pattern` matched."""
    out: list[dict] = []
    for line in text.splitlines():
        h = HEADER.match(line)
        if h and "Context" in line:
            out.append({"kernel": h.group(1)})
            continue
        if out:
            m = pattern.match(line)
            if m:
                out[-1][m.group(1)] = float(m.group(3).replace(",", "")) * SCALE.get(m.group(2), 1.0)
            p = PIPE.search(line)
            if p and pattern is SECTION_ROW:
                out[-1]["pipe"] = f"{p.group(1)} {p.group(2)}%"
    return out


def variant_names(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := NAME_LINE.match(line))]


def main(outdir: str) -> None:
    out = pathlib.Path(outdir)
    for mfile in sorted(out.glob("metrics_*.txt")):
        tag = mfile.stem.removeprefix("metrics_")
        text = mfile.read_text()
        rows = blocks(text, METRIC)
        names = variant_names(text)
        sections = blocks((out / f"sections_{tag}.txt").read_text(), SECTION_ROW) \
            if (out / f"sections_{tag}.txt").exists() else []
        cub = out / f"cublas_metrics_{tag}.txt"
        cublas = blocks(cub.read_text(), METRIC) if cub.exists() else []
        print(f"\n{tag}: time us | elapsed kcycles (max SM) | tensor % of elapsed | L2 MB | DRAM MB | Minst"
              " || SM GHz | L1 % | L2 % | top pipe")
        for i, r in enumerate(rows + cublas):
            name = names[i] if i < len(rows) and i < len(names) else (r["kernel"] if i >= len(rows) else f"#{i}")
            el = r.get("sm__cycles_elapsed.max", 0.0)
            tensor = 100 * r.get("sm__pipe_tensor_op_hmma_cycles_active.avg", 0.0) / el if el else 0.0
            s = sections[i] if i < len(sections) else {}
            print(f"  {name:24s} {r.get('gpu__time_duration.sum', 0):8.1f} {el / 1e3:8.1f} {tensor:6.1f}"
                  f" {r.get('lts__t_bytes.sum', 0):9.1f} {r.get('dram__bytes_read.sum', 0):8.1f}"
                  f" {r.get('smsp__inst_executed.sum', 0) / 1e6:6.2f}"
                  f" || {s.get('SM Frequency', 0):4.2f} {s.get('L1/TEX Cache Throughput', 0):5.1f}"
                  f" {s.get('L2 Cache Throughput', 0):5.1f} {s.get('pipe', '')}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
