"""Flax modules around the synced ops (needs flax: ``pip install cusync_jax[flax]``).

    import cusync_jax as cs
    mlp = cs.flax.SyncedMLP(ffn_features=6144)                         # linen
    mlp = cs.flax.nnx.SyncedMLP(12288, 6144, rngs=nnx.Rngs(0))         # nnx

Each module owns the same parameters, under the same names and shapes, as
the plain Flax layers it replaces, so checkpoints of the plain model load
into the synced one and back:

    linen SyncedMLP       {"Dense_0": {kernel, bias}, "Dense_1": {kernel, bias}}
    linen SyncedConvPair  {"Conv_0": {kernel, bias}, "Conv_1": {kernel, bias}}
    nnx   SyncedMLP       .linear1, .linear2 (nnx.Linear)
    nnx   SyncedConvPair  .conv1, .conv2 (nnx.Conv)
"""
from . import nnx
from .linen import SyncedConvPair, SyncedMLP

__all__ = ["SyncedMLP", "SyncedConvPair", "nnx"]
