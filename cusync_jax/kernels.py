"""The kernel configurations each backend can run, for the planner.

A configuration is a tile shape (rows, columns, k-block) of one GEMM stage
and the number of such tiles (CTAs) one SM holds at once. The CPU executor
runs any tile shape; a GPU kernel is compiled for a fixed set.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class TileShape:
    m: int
    n: int
    k: int

    def __post_init__(self):
        for name in ("m", "n", "k"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"tile: {name} must be a positive int, got {v!r}")

    @property
    def text(self) -> str:
        """'128x128x64'."""
        return f"{self.m}x{self.n}x{self.k}"


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    kernel: int          # kernel family code, passed to the handler
    tile: TileShape
    ctas_per_sm: int = 1
    name: str = ""
    # Compute capabilities (x 10) the family's code runs on.
    min_arch: int = 80
    max_arch: int = 1000
    # Measured GEMM throughput relative to XLA's dot on the MLP shapes
    # (bench/NOTES*.md): the planner divides simulated time by it.
    relative_rate: float = 1.0
    # The largest producer tile-row count at which TileSync beats RowSync on
    # this family (0: its per-k-block waits never paid in measurement).
    tile_sync_rows: int = 0
    # SwiGLU: StridedSync (one wait for gate and up) or RowSync, as measured.
    swiglu_strided: bool = True
    # The tile order plans take unless told otherwise (tile_order.h).
    default_order: str = "row_major"
    # Whether the configuration has a SwiGLU form (gate and up in one tile).
    swiglu: bool = True
    # Whether the family also compiled it to run a GEMM stream-K (serial
    # mode, no clusters; cusync/stream_k.h).
    stream_k: bool = False
    # Whether automatic plans consider it; False: only a plan that names its
    # tile runs it (a configuration not yet measured against the others).
    automatic: bool = True

    def runs_on(self, arch: int) -> bool:
        return self.min_arch <= arch <= self.max_arch


# CPU: tiles small enough that a test problem has many of them (so the
# synchronization is exercised), large enough to amortize the per-tile work.
CPU_DEFAULT_TILE = TileShape(32, 64, 64)

# CUDA kernels compiled into _cusync_cuda (ffi/cuda/). Kernel 0: the portable
# mma.sync GEMM with cuSync hooks (ffi/cuda/mlp_sm80_kernels.cuh lists the same
# shapes): 128x128 runs two blocks per SM (4 warps, 246 registers, 64 KiB of
# shared memory), the 8-warp wide shapes one.
CUDA_CONFIGS = (
    # Measured (bench/NOTES.md, version 1): 0.24-0.47x of XLA; TileSync and
    # StridedSync lost 15-25% to RowSync at every size.
    KernelConfig(0, TileShape(128, 128, 32), 2, "sm80_128x128x32", relative_rate=0.42,
                 swiglu_strided=False),
    KernelConfig(0, TileShape(128, 256, 32), 1, "sm80_128x256x32", relative_rate=0.42,
                 swiglu_strided=False),
    KernelConfig(0, TileShape(256, 128, 32), 1, "sm80_256x128x32", relative_rate=0.42,
                 swiglu_strided=False),
    # Kernel 1: the Hopper GEMM-chain kernel (wgmma + TMA, persistent, one CTA
    # of 3 warpgroups per SM; ffi/cuda/sm90_chain_instances.h lists the same
    # shapes). The fused mode runs both GEMMs with one tile; serial and
    # streams launch each GEMM on its own, so each may take its own.
    # Measured (bench/results/h200-mlp.json, f99a7d6): in stream order 0.70-0.98x
    # of XLA (256 tokens lowest); TileSync 0.8-0.9x of RowSync; for SwiGLU
    # RowSync beats StridedSync. The grouped order runs the GEMMs 4-13 % faster
    # than row-major in stream order at every size but LLaMA's 4096 (-1 %).
    KernelConfig(1, TileShape(128, 128, 64), 1, "sm90_128x128x64", min_arch=90, max_arch=90,
                 relative_rate=0.85, swiglu_strided=False, default_order="grouped", stream_k=True),
    KernelConfig(1, TileShape(128, 256, 64), 1, "sm90_128x256x64", min_arch=90, max_arch=90,
                 relative_rate=0.85, swiglu_strided=False, default_order="grouped"),
    # 128x96 (pingpong, no SwiGLU form): at few tokens 96-wide tiles fill the
    # 132 SMs where 128-wide ones leave a quarter idle (GPT-3, 256 tokens: 128
    # producer tiles instead of 96), the tile XLA's dot takes there. Measured
    # (bench/results/h200-gemm.json, af4d230): 0.73-0.84x of 128x128's rate
    # per SM from 1024 rows on (its 64-byte-swizzled B). Since 128x128 stores
    # through TMA (6a4f3ec) it is also slower at 256 rows: GPT-3's GEMMs 81.7
    # against 77.0 us in the MLP (bench/logs/h200-timeline-*.log), 1.03-1.07x
    # alone (h200-few-rows-35d8469.log), so a rate of 0.60 of 128x128's.
    KernelConfig(1, TileShape(128, 96, 64), 1, "sm90_128x96x64", min_arch=90, max_arch=90,
                 relative_rate=0.60, swiglu_strided=False, default_order="grouped", swiglu=False),
    # 128x192 (cooperative, no SwiGLU form): where 192-wide tiles fill the SMs
    # in whole waves and 128-wide ones do not. Measured alone
    # (bench/logs/h200-harness-few-5ae6b25.log): 1.31x of 128x128 at GPT-3's
    # second GEMM at 256 rows (128 tiles against 192), 1.32x at its first
    # GEMM at 512 rows, 1.34x at LLaMA's first at 512; at a full wave its rate
    # per SM is 128x128's or a little above, so the same rate. Stream-K splits
    # its 64 tiles at GPT-3's first GEMM at 256 tokens in halves on 128 SMs.
    KernelConfig(1, TileShape(128, 192, 64), 1, "sm90_128x192x64", min_arch=90, max_arch=90,
                 relative_rate=0.85, swiglu_strided=False, default_order="grouped", swiglu=False,
                 stream_k=True),
    # 96x128 (tokens as N: the product runs transposed, the weight tile as
    # wgmma's M and 96 rows of x as its N; pingpong or cooperative like
    # 128x128; SwiGLU tiles hold 64 gate and 64 up columns): 96-row tiles fill
    # the SMs where 128-row ones do not (LLaMA's SwiGLU producer: 3 x 44 = 132
    # tiles at 256 tokens against 2 x 44). Opt-in (tile=(96, 128, 64)): it
    # measured 1.02-1.05x of serial for GPT-3's first GEMM at 768 tokens, but
    # LLaMA's SwiGLU producer at 256 took 59 us (cooperative) and 66 us
    # (pingpong) against 51 on 128x128 (bench/NOTES_sm90.md, stops 33-34).
    KernelConfig(1, TileShape(96, 128, 64), 1, "sm90_96x128x64", min_arch=90, max_arch=90,
                 relative_rate=0.85, swiglu_strided=False, default_order="grouped", automatic=False),
)


# Implicit-GEMM conv-pair kernels (ffi/cuda/conv_*.cuh): m = output pixels,
# n = output channels, k = one filter tap's channel block (k divides the
# channel counts the kernel accepts, so a k-block never straddles two taps).
CONV_CUDA_CONFIGS = (
    # Measured (bench/results/h200-conv.json, ResNet-38 pairs, pipelined k-loop):
    # serial at 0.12-0.58x of XLA (cuDNN); split-K shares reach 0.58-0.89x at batch 1.
    KernelConfig(0, TileShape(128, 64, 32), 2, "sm80_conv_128x64x32", relative_rate=0.3),
)
# The Hopper conv (kernel family 1: the GEMM-chain kernel with an im2col A;
# ffi/cuda/conv_sm90.cu): in and mid channels multiples of 64, no split-K.
# Not yet measured, so opt-in: plan_conv_pair takes it only for a tile named
# explicitly, and the planner never chooses it.
CONV_SM90_CONFIGS = (
    KernelConfig(1, TileShape(128, 64, 64), 1, "sm90_conv_128x64x64", min_arch=90, max_arch=90),
    KernelConfig(1, TileShape(128, 128, 64), 1, "sm90_conv_128x128x64", min_arch=90, max_arch=90),
)


# The halo conv (kernel family 2, ffi/cuda/halo_conv_sm90.cu): 3x3 filters,
# channels multiples of 64; a tile is 128 positions x 64 output channels and
# its k-block one input channel block's 9 taps (9 x 64), loaded once as a halo.
# Opt-in like the im2col Hopper conv: taken for a tile named explicitly, or
# where the tuned table measured it fastest.
CONV_HALO_CONFIGS = (
    KernelConfig(2, TileShape(128, 64, 576), 1, "sm90_halo_conv_128x64x576", min_arch=90, max_arch=90),
)


def cuda_configs_for_arch(arch: int, configs=CUDA_CONFIGS) -> tuple:
    """The configurations whose code runs on compute capability `arch` (x 10);
    an unknown arch (0) keeps them all, for what-if planning."""
    return tuple(c for c in configs if arch == 0 or c.runs_on(arch))


def cuda_config_for(tile: TileShape, configs=CUDA_CONFIGS) -> KernelConfig:
    for c in configs:
        if c.tile == tile:
            return c
    raise ValueError(
        f"tile: the CUDA backend has no kernel for tile {tile.text}; "
        f"available: {[c.tile.text for c in configs]}")
