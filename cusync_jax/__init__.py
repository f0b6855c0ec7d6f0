"""cusync_jax: cuSync's fine-grained synchronization of dependent GPU kernels
inside jitted JAX programs.

    y = cusync_jax.synced_mlp(x, w1, w2, activation="gelu")
"""
from . import _backend
from .kernels import TileShape
from .mlp import mlp_reference, synced_mlp, synced_mlp_p
from .planner import (A100, DEVICES, H200, V100, CpuOptions, DeviceModel, MlpPlan, MlpPlanReport,
                      plan_mlp)
from .policies import (Conv2DTileSync, Optimizations, RowSync, StridedSync, TileSync)

cuda_built = _backend.cuda_built

__version__ = "0.1.0"

__all__ = [
    "synced_mlp", "mlp_reference", "plan_mlp", "MlpPlan", "MlpPlanReport", "TileShape",
    "TileSync", "RowSync", "StridedSync", "Conv2DTileSync", "Optimizations", "CpuOptions",
    "DeviceModel", "V100", "A100", "H200", "DEVICES", "cuda_built", "synced_mlp_p",
]
