"""cusync_jax: cuSync's fine-grained synchronization of dependent GPU kernels
inside jitted JAX programs.

    y = cusync_jax.synced_mlp(x, w1, w2, activation="gelu")
"""
from . import _backend
from .conv import conv_pair_reference, synced_conv_pair, synced_conv_pair_p
from .conv_planner import ConvPairPlan, ConvPairPlanReport, plan_conv_pair
from .kernels import TileShape
from .mlp import mlp_reference, synced_mlp, synced_mlp_p
from .parallel import tp_synced_mlp
from .planner import (A100, DEVICES, H200, V100, CpuOptions, DeviceModel, MlpPlan, MlpPlanReport,
                      plan_mlp)
from .policies import (Conv2DTileSync, Optimizations, RowSync, StridedSync, TileSync)

cuda_built = _backend.cuda_built

__version__ = "0.1.0"

__all__ = [
    "synced_mlp", "mlp_reference", "plan_mlp", "MlpPlan", "MlpPlanReport", "TileShape",
    "TileSync", "RowSync", "StridedSync", "Conv2DTileSync", "Optimizations", "CpuOptions",
    "DeviceModel", "V100", "A100", "H200", "DEVICES", "cuda_built", "synced_mlp_p",
    "synced_conv_pair", "conv_pair_reference", "plan_conv_pair", "ConvPairPlan",
    "ConvPairPlanReport", "synced_conv_pair_p", "tp_synced_mlp",
]


def __getattr__(name):
    # `cs.flax` needs flax, an optional dependency: import it on first use.
    if name == "flax":
        import importlib
        return importlib.import_module(".flax", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
