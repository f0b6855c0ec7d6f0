"""Energy per GEMM under sustained load: joins the output of
`gemm_vs_cutlass sustain M N K SECONDS` (each variant launched back to back,
its wall-clock window printed) with an `nvidia-smi` log taken beside it, and
prints per variant the median time, the mean SM clock and power over the
window, and time x power: the energy of one GEMM. At the H200's power cap a
GEMM's time is its energy over the cap, so this is the number to lower.

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \\
        --format=csv,noheader -lms 100 > smi.csv &
    build/probe/gemm_vs_cutlass sustain 4096 6144 12288 3 > sustain.log
    python bench/energy.py sustain.log smi.csv

(scripts/sustain_round.sh does all three.)
"""
from __future__ import annotations

import argparse
import json
import re
import statistics

# The first moments of a window still carry the previous variant's clocks.
SETTLE_S = 0.5

_SUSTAIN = re.compile(r"sustain (\d+) (\d+) (\d+)\s+(\S+)\s+(\d\d:\d\d:\d\d\.\d+)-(\d\d:\d\d:\d\d\.\d+)\s+"
                      r"median ([\d.]+) ms")


def seconds_of_day(clock: str) -> float:
    """'12:15:01.805' -> seconds since midnight."""
    h, m, s = clock.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def parse_smi(lines) -> list[tuple[float, float, float, str]]:
    """nvidia-smi csv rows (timestamp, clocks.sm, power.draw, temperature,
    throttle reasons; no header) -> (seconds of day, MHz, W, reasons).
    Rows that do not parse (a header, an error line) are skipped."""
    samples = []
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        try:
            clock = parts[0].split(" ")[1]
            samples.append((seconds_of_day(clock), float(parts[1].split()[0]), float(parts[2].split()[0]),
                            parts[4]))
        except (IndexError, ValueError):
            continue
    return samples


def parse_sustain(lines) -> list[dict]:
    """The variant lines of a sustain run, in order, with the section header
    ('== name ...') that precedes them, if any."""
    rows, section = [], ""
    for line in lines:
        if line.startswith("=="):
            section = line.strip("= \n")
            continue
        m = _SUSTAIN.match(line.strip())
        if m:
            rows.append(dict(section=section, shape=[int(m.group(i)) for i in (1, 2, 3)], variant=m.group(4),
                             start=seconds_of_day(m.group(5)), end=seconds_of_day(m.group(6)),
                             ms=float(m.group(7))))
    return rows


def join(rows: list[dict], samples: list[tuple[float, float, float, str]], settle_s: float = SETTLE_S) -> list[dict]:
    """Each row with its window's mean clock and power (after settle_s) and the
    energy of one GEMM in mJ (ms x W). A window with no sample is an error:
    the two logs do not overlap."""
    out = []
    for r in rows:
        window = [s for s in samples if r["start"] + settle_s <= s[0] <= r["end"]]
        if not window:
            raise ValueError(f"no nvidia-smi sample between {r['start'] + settle_s:.1f} and {r['end']:.1f} s "
                             f"of the day for {r['variant']} ({r['section'] or 'no section'}): "
                             "were both logs taken on the same run?")
        mhz = statistics.mean(s[1] for s in window)
        watts = statistics.mean(s[2] for s in window)
        out.append(dict(r, mhz=round(mhz), watts=round(watts, 1), mj=round(r["ms"] * watts, 2),
                        throttle=sorted({s[3] for s in window})))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sustain_log")
    ap.add_argument("smi_csv")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args(argv)
    with open(args.sustain_log) as f:
        rows = parse_sustain(f)
    with open(args.smi_csv) as f:
        samples = parse_smi(f)
    joined = join(rows, samples)
    section = None
    for r in joined:
        if r["section"] != section:
            section = r["section"]
            print(f"== {section}")
        print(f"  {'x'.join(map(str, r['shape'])):16s} {r['variant']:22s} {r['ms']:8.4f} ms  {r['mhz']:5d} MHz  "
              f"{r['watts']:6.1f} W  {r['mj']:8.2f} mJ  throttle {','.join(r['throttle'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(joined, f, indent=1)


if __name__ == "__main__":
    main()
