"""cuBLAS (through torch) under sustained load, in the format of
`gemm_vs_cutlass sustain` so bench/energy.py joins it with nvidia-smi's log:
x [M, K] @ w [K, N], float16, row-major as the harness's GEMM, launched back
to back in batches of 50 between CUDA events for SECONDS.

    python bench/cublas_sustain.py M N K SECONDS
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import time


def stamp() -> str:
    return datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]


def sustain_line(m: int, n: int, k: int, name: str, start: str, end: str, per: list) -> str:
    """The harness's line for a variant's window (bench/energy.py parses it)."""
    return (f"sustain {m} {n} {k}  {name:22s} {start}-{end}  median {statistics.median(per):.4f} ms  "
            f"first {per[0]:.4f}  last {per[-1]:.4f}  ({len(per)} batches)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("m", "n", "k"):
        ap.add_argument(name, type=int)
    ap.add_argument("seconds", type=float)
    args = ap.parse_args(argv)
    import torch  # the GPU machine's; not a dependency of the package

    x = torch.randn(args.m, args.k, device="cuda", dtype=torch.float16)
    w = torch.randn(args.k, args.n, device="cuda", dtype=torch.float16) / args.k ** 0.5
    out = torch.empty(args.m, args.n, device="cuda", dtype=torch.float16)
    torch.matmul(x, w, out=out)
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per, start, t0 = [], stamp(), time.monotonic()
    while time.monotonic() - t0 < args.seconds:
        begin.record()
        for _ in range(50):
            torch.matmul(x, w, out=out)
        end.record()
        end.synchronize()
        per.append(begin.elapsed_time(end) / 50)
    print(sustain_line(args.m, args.n, args.k, "cublas_torch", start, stamp(), per), flush=True)
    time.sleep(1)


if __name__ == "__main__":
    main()
