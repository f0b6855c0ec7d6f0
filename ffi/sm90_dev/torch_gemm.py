"""cuBLAS (through PyTorch) times of the MLP's GEMM shapes, for the harness's table."""
import torch

SHAPES = [(6144, 12288), (12288, 6144), (5632, 8192), (8192, 2816)]
for dtype in (torch.float16, torch.bfloat16):
    for m in (256, 1024, 2048, 4096):
        for n, k in SHAPES:
            sets = [(torch.randn(m, k, device="cuda", dtype=dtype),
                     torch.randn(k, n, device="cuda", dtype=dtype) / k**0.5) for _ in range(2)]
            for i in range(3):
                torch.matmul(*sets[i % 2])
            ts = []
            for i in range(40):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record(); torch.matmul(*sets[i % 2]); b.record(); b.synchronize()
                ts.append(a.elapsed_time(b))
            ts.sort()
            ms = ts[len(ts) // 2]
            print(f"torch {str(dtype)[6:]:8s} M={m:5d} N={n:5d} K={k:5d}  {ms:.4f} ms  "
                  f"{2*m*n*k/ms/1e9:.0f} TFLOP/s")
