"""A table from `ncu --metrics ... --csv` output: one line per profiled kernel
(its launch ID, short name, grid), the time in us, the cycles, the clock, the
tensor pipe's share of the peak and the memory bytes in MB.

    python bench/ncu_table.py ncu.csv
"""
from __future__ import annotations

import collections
import csv
import io
import re
import sys

# ncu scales units per value; the table prints us, MB, MHz.
SCALE = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3,
         "hz": 1e-6, "Khz": 1e-3, "Mhz": 1.0, "Ghz": 1e3, "cycle": 1.0, "cycle/second": 1e-6, "cycle/usecond": 1.0, "cycle/nsecond": 1e3,
         "%": 1.0, "": 1.0}
COLUMNS = [  # (metric, heading, format)
    ("gpu__time_duration.sum", "us", "{:9.1f}"),
    ("sm__cycles_elapsed.max", "kcyc", "{:8.1f}"),
    ("sm__cycles_active.avg", "active k", "{:9.1f}"),
    ("sm__cycles_elapsed.avg.per_second", "MHz", "{:6.0f}"),
    ("tensor", "tensor%", "{:8.1f}"),
    ("dram__bytes_read.sum", "DRAM MB", "{:8.1f}"),
    ("lts__t_bytes.sum", "L2 MB", "{:8.1f}"),
    ("lts__t_sector_hit_rate.pct", "L2 hit%", "{:8.1f}"),
]


def number(text: str) -> float:
    return float(text.replace(",", ""))


def kernels(text: str) -> list[dict]:
    """One dict per kernel launch, in launch order: name, grid, metric values."""
    start = text.find('"ID"')
    if start < 0:
        return []
    by_id: dict = collections.OrderedDict()
    for row in csv.DictReader(io.StringIO(text[start:])):
        k = by_id.setdefault(row["ID"], {"name": row["Kernel Name"], "grid": row.get("Grid Size", "")})
        unit = row.get("Metric Unit", "")
        value = number(row["Metric Value"]) * SCALE.get(unit, 1.0)
        if row["Metric Name"].endswith(".max") or row["Metric Name"].endswith(".avg"):
            k[row["Metric Name"]] = value / (1e3 if unit == "cycle" else 1.0)
        else:
            k[row["Metric Name"]] = value
    out = list(by_id.values())
    for k in out:
        # The hmma metric counts the SM's four sub-partitions: a quarter of it
        # over the elapsed cycles is the share of the tensor peak.
        hmma, elapsed = k.get("sm__pipe_tensor_op_hmma_cycles_active.avg"), k.get("sm__cycles_elapsed.max")
        if hmma is not None and elapsed:
            k["tensor"] = 100.0 * hmma / elapsed / 4.0
    return out


def short(name: str) -> str:
    name = re.sub(r"^void ", "", name)
    m = re.match(r"([\w:]+)", name)
    base = m.group(1).split("::")[-1] if m else name
    if "ChainConfig" in name:  # the chain kernel's template arguments say which form
        args = re.findall(r"ChainConfig<(.*?)>\s*>", name)
        base += f"<{args[0][:60]}>" if args else ""
    return base[:72]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    for path in argv:
        ks = kernels(open(path).read())
        print(f"{path}: {len(ks)} kernels")
        print(f"  {'#':>3} {'kernel':<72} {'grid':<14}" + "".join(f"{h:>{len(f.format(0))+1}}" for _, h, f in COLUMNS))
        for i, k in enumerate(ks):
            cells = "".join(" " + (f.format(k[m]) if m in k else " " * len(f.format(0))) for m, _, f in COLUMNS)
            print(f"  {i:>3} {short(k['name']):<72} {k['grid']:<14}{cells}")


if __name__ == "__main__":
    main()
