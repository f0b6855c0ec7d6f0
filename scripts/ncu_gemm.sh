#!/usr/bin/env bash
# Where the Hopper GEMM kernel stalls, per SASS instruction: Nsight Compute's
# warp-stall sampling of one launch of the kernel (bench/profile_gemm.py), with
# the 30 most-sampled instructions printed. Run after a build (for example
# SKIP_TESTS=1 SKIP_BENCH=1 scripts/gpu_check.sh OUTDIR).
#
#   scripts/ncu_gemm.sh OUTDIR M N K [extra bench/profile_gemm.py arguments]
set -uo pipefail
OUTDIR=${1:?usage: scripts/ncu_gemm.sh OUTDIR M N K [args]}
M=${2:?M}; N=${3:?N}; K=${4:?K}; shift 4
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
name="$OUTDIR/ncu_${M}x${N}x${K}"
# The summary sections, then the per-instruction source page (CSV).
timeout -k 10 150 ncu --profile-from-start off --kernel-name regex:chain_kernel \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.txt" 2>&1
echo "summary sections: rc $? ($name.txt)"
timeout -k 10 150 ncu --profile-from-start off --kernel-name regex:chain_kernel \
  --section SourceCounters --page source --print-source sass --csv \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.sass.csv" 2>&1
echo "source page: rc $? ($name.sass.csv)"
"$PY" - "$name.sass.csv" <<'PYEOF'
import csv, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"') and "Source" in l), None)
if start is None:
    print("no source table; the file begins:\n" + "\n".join(lines[:20]))
    sys.exit(0)
rows = list(csv.DictReader(lines[start:]))
cols = list(rows[0].keys()) if rows else []
samp = next((c for c in cols if "Stall Sampling (All" in c), None) or next((c for c in cols if "Sampling" in c), None)
if samp is None:
    print("columns:", cols)
    sys.exit(0)
def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0
total = sum(num(r[samp]) for r in rows) or 1.0
print(f"{len(rows)} instructions, column {samp!r}, {total:.0f} samples; top 30:")
for r in sorted(rows, key=lambda r: -num(r[samp]))[:30]:
    print(f"{100 * num(r[samp]) / total:6.2f}%  {r.get('Address', ''):>8}  {r.get('Source', '')}")
PYEOF
