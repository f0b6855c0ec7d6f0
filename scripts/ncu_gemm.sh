#!/usr/bin/env bash
# Where the Hopper GEMM kernel stalls, per SASS instruction: Nsight Compute's
# warp-stall sampling of one launch of the kernel (bench/profile_gemm.py), with
# the 30 most-sampled instructions of each profiled kernel printed. Run after a
# build (for example SKIP_TESTS=1 SKIP_BENCH=1 scripts/gpu_check.sh OUTDIR).
#
#   scripts/ncu_gemm.sh OUTDIR M N K [extra bench/profile_gemm.py arguments]
#
# NCU_KERNELS: the kernel-name regex (default: ours only; "chain_kernel|nvjet|gemm"
# adds XLA's cuBLAS or Triton kernel of the same shape, launched in the same range).
set -uo pipefail
OUTDIR=${1:?usage: scripts/ncu_gemm.sh OUTDIR M N K [args]}
M=${2:?M}; N=${3:?N}; K=${4:?K}; shift 4
mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
KERNELS=${NCU_KERNELS:-chain_kernel}
name="$OUTDIR/ncu_${M}x${N}x${K}"
# The summary sections, then the per-instruction source page (CSV).
timeout -k 10 200 ncu --profile-from-start off --kernel-name "regex:$KERNELS" \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section InstructionStats --section WarpStateStats \
  --section SchedulerStats --section LaunchStats \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.txt" 2>&1
echo "summary sections: rc $? ($name.txt)"
timeout -k 10 200 ncu --profile-from-start off --kernel-name "regex:$KERNELS" \
  --section SourceCounters --page source --print-source sass --csv \
  "$PY" bench/profile_gemm.py "$M" "$N" "$K" "$@" > "$name.sass.csv" 2>&1
echo "source page: rc $? ($name.sass.csv)"
"$PY" - "$name.sass.csv" <<'PYEOF'
import collections, csv, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
# One source table per profiled kernel, each under its own CSV header.
starts = [i for i, l in enumerate(lines) if l.startswith('"') and '"Source"' in l]
if not starts:
    print("no source table; the file begins:\n" + "\n".join(lines[:20]))
    sys.exit(0)
def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return 0.0
for n, start in enumerate(starts):
    end = starts[n + 1] if n + 1 < len(starts) else len(lines)
    title = next((lines[j] for j in range(start - 1, max(-1, start - 6), -1) if lines[j].strip()), "")
    rows = [r for r in csv.DictReader(lines[start:end]) if r.get("Source")]
    cols = list(rows[0].keys()) if rows else []
    samp = next((c for c in cols if "Stall Sampling (All" in c), None) or next((c for c in cols if "Sampling" in c), None)
    if samp is None:
        print("columns:", cols)
        continue
    total = sum(num(r[samp]) for r in rows) or 1.0
    # Opcode of each instruction, its predicate ("@P0") and modifiers dropped.
    ops = collections.Counter(
        next((w for w in r["Source"].split() if not w.startswith("@")), "").split(".")[0] for r in rows)
    print(f"== kernel {n}: {title[:160]}")
    print(f"{len(rows)} instructions, column {samp!r}, {total:.0f} samples")
    print("static opcode counts:", " ".join(f"{k}:{v}" for k, v in ops.most_common(25)))
    print("top 30:")
    for r in sorted(rows, key=lambda r: -num(r[samp]))[:30]:
        print(f"{100 * num(r[samp]) / total:6.2f}%  {r.get('Address', ''):>8}  {r.get('Source', '')}")
PYEOF
