"""cuBLAS (through torch) on the GEMM harness's shapes, timed as the harness
times its own kernels (bench/gemm_vs_cutlass.cu), so the two print comparable
lines: x [M, K] @ w [K, N] row-major, three rotated input sets, alternated
rounds of 20 launches; each launch alone between two events after an idle GPU,
or (HARNESS_BACK_TO_BACK=1) the 20 back to back, per launch.

    python bench/cublas_gemms.py ROUNDS {few | many | M N K} [--dtype float16]
"""
from __future__ import annotations

import argparse
import os
import statistics

NK = ((6144, 12288), (12288, 6144), (5632, 8192), (8192, 2816))  # the MLP's GEMMs: GPT-3's, LLaMA's
SHAPES = {"few": [(m, n, k) for m in (256, 512, 768) for n, k in NK],     # the harness's modes
          "many": [(m, n, k) for m in (1024, 4096) for n, k in NK]}
ITERS, SETS = 20, 3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rounds", type=int)
    ap.add_argument("shape", nargs="+", help="few, many, or M N K")
    ap.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    args = ap.parse_args(argv)
    if len(args.shape) == 1 and args.shape[0] in SHAPES:
        shapes = SHAPES[args.shape[0]]
    elif len(args.shape) == 3:
        shapes = [tuple(int(v) for v in args.shape)]
    else:
        ap.error(f"shape: expected 'few', 'many' or M N K, got {args.shape}")
    import torch  # the GPU machine's; not a dependency of the package

    dtype = getattr(torch, args.dtype)
    back_to_back = os.environ.get("HARNESS_BACK_TO_BACK") == "1"
    print("timing:", "back to back, per launch" if back_to_back else "one launch after an idle GPU")
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for m, n, k in shapes:
        xs = [torch.randn(m, k, device="cuda", dtype=dtype) * 0.25 for _ in range(SETS)]
        ws = [torch.randn(k, n, device="cuda", dtype=dtype) * 0.25 for _ in range(SETS)]
        out = torch.empty(m, n, device="cuda", dtype=dtype)
        times = []
        for _ in range(args.rounds):
            if back_to_back:
                for rep in range(2):  # the first warms up
                    begin.record()
                    for i in range(ITERS):
                        torch.matmul(xs[i % SETS], ws[i % SETS], out=out)
                    end.record()
                    end.synchronize()
                    if rep:
                        times.append(begin.elapsed_time(end) / ITERS)
                continue
            for i in range(ITERS + 3):
                torch.cuda.synchronize()
                begin.record()
                torch.matmul(xs[i % SETS], ws[i % SETS], out=out)
                end.record()
                end.synchronize()
                if i >= 3:
                    times.append(begin.elapsed_time(end))
        med = statistics.median(times)
        print(f"{m:5d} {n:6d} {k:6d}  {'cublas_torch':26s} {med:8.4f} ms {2 * m * n * k / med * 1e-9:5.0f} TF/s",
              flush=True)


if __name__ == "__main__":
    main()
