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


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    kernel: int          # kernel family code, passed to the handler
    tile: TileShape
    ctas_per_sm: int = 1
    name: str = ""


# CPU: tiles small enough that a test problem has many of them (so the
# synchronization is exercised), large enough to amortize the per-tile work.
CPU_DEFAULT_TILE = TileShape(32, 64, 64)

# CUDA kernels compiled into _cusync_cuda (ffi/cuda/). Kernel 0: the portable
# mma.sync GEMM with cuSync hooks (ffi/cuda/mlp_sm80_kernels.cuh lists the same
# shapes): 128x128 runs two blocks per SM (4 warps, 246 registers, 64 KiB of
# shared memory), the 8-warp wide shapes one.
CUDA_CONFIGS = (
    KernelConfig(0, TileShape(128, 128, 32), 2, "sm80_128x128x32"),
    KernelConfig(0, TileShape(128, 256, 32), 1, "sm80_128x256x32"),
    KernelConfig(0, TileShape(256, 128, 32), 1, "sm80_256x128x32"),
    # Kernel 1: the Hopper GEMM-chain kernel (wgmma + TMA, persistent, one CTA
    # of 3 warpgroups per SM; ffi/cuda/sm90_chain_instances.h lists the same
    # shapes). Both GEMMs take the same tile.
    KernelConfig(1, TileShape(128, 128, 64), 1, "sm90_128x128x64"),
    KernelConfig(1, TileShape(128, 256, 64), 1, "sm90_128x256x64"),
)


# Implicit-GEMM conv-pair kernels (ffi/cuda/conv_*.cuh): m = output pixels,
# n = output channels, k = one filter tap's channel block (k divides the
# channel counts the kernel accepts, so a k-block never straddles two taps).
CONV_CUDA_CONFIGS = (
    KernelConfig(0, TileShape(128, 64, 32), 2, "sm80_conv_128x64x32"),
)


def cuda_config_for(tile: TileShape, configs=CUDA_CONFIGS) -> KernelConfig:
    for c in configs:
        if c.tile == tile:
            return c
    raise ValueError(
        f"tile: the CUDA backend has no kernel for tile {tile.m}x{tile.n}x{tile.k}; "
        f"available: {[f'{c.tile.m}x{c.tile.n}x{c.tile.k}' for c in configs]}")
