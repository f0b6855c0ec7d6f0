"""Tensor parallelism for synced_mlp: Megatron's split over one mesh axis.

    y = tp_synced_mlp(x, w1, w2, b1=b1, b2=b2, mesh=mesh, axis="model")

Device i of the ``axis`` devices holds columns ``i`` of w1 (and b1) and the
matching rows of w2, runs the whole synced MLP on its slice (both GEMMs
local, so cuSync's producer/consumer overlap is untouched), and one
``lax.psum`` over ``axis`` adds the partial outputs; b2 is added once, after
the sum. x is replicated over ``axis`` (optionally split by its leading
dimension over ``batch_axis``, for data parallelism).

Why a shard_map helper and not a ``custom_partitioning`` rule on the
primitive: the Megatron split is a decision about the layer (which weight is
cut along which dimension, and that one all-reduce follows), not something
one op can infer from the shardings of its operands. A partitioning rule
would see, e.g., w1 split by rows or x split by features, and would have to
either invent other collectives or gather. With shard_map the layout is
explicit, the only communication is JAX's own ``psum``, and it composes with
``jit`` (sharded inputs in the expected layout are used in place; others are
resharded by XLA) and ``grad`` (the op's custom VJP runs per shard, and JAX
transposes the psum and the shard_map). It also avoids
custom_partitioning's Shardy sharding-rule API, which differs across the
jax versions this package supports. Calling plain ``synced_mlp`` under jit on
sharded operands stays correct but is not split: XLA gathers the operands
and every device computes the whole MLP.

Placing weights so that jit reshards nothing: w1
``NamedSharding(mesh, P(None, axis))``, b1 ``P(axis)``, w2 ``P(axis, None)``,
b2 and x ``P()``.

SwiGLU: w1 is ``[gate | up]`` (``[hidden, 2 * ffn]``); a plain column split
would give device 0 only gate columns. The helper therefore views w1 as
``[hidden, 2, ffn]`` (and b1 as ``[2, ffn]``) and splits the ffn axis, so
device i gets ``[gate_i | up_i]``: gate and up columns of the same slice,
which is the local w1 its synced_mlp needs. Weights stored in that view
(``w1.reshape(hidden, 2, ffn)`` placed with ``P(None, None, axis)``) avoid a
reshuffle under jit; the helper accepts that 3-D w1 directly as well.
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

from .activations import activation_slices, check_activation
from .mlp import _validate, synced_mlp
from .planner import CpuOptions
from .policies import Optimizations

try:  # jax >= 0.7
    from jax import shard_map as _shard_map
    _NO_CHECK = {"check_vma": False}
except ImportError:  # older jax
    from jax.experimental.shard_map import shard_map as _shard_map
    _NO_CHECK = {"check_rep": False}


def _axis_size(mesh: Mesh, axis: str, argument: str) -> int:
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh: expected a jax.sharding.Mesh, got {type(mesh).__name__}")
    if axis not in mesh.axis_names:
        raise ValueError(f"{argument}: {axis!r} is not an axis of the mesh (axes "
                         f"{mesh.axis_names})")
    return mesh.shape[axis]


def tp_synced_mlp(x, w1, w2, *, mesh: Mesh, axis: str = "model",
                  batch_axis: Optional[str] = None, b1=None, b2=None,
                  activation: str = "gelu", policy="auto", tile=None, mode: str = "auto",
                  optimizations: Optional[Optimizations] = None,
                  cpu: Optional[CpuOptions] = None):
    """``synced_mlp`` split Megatron-style over mesh axis ``axis``.

    Shapes as for synced_mlp (w1 [hidden, ffn], or for SwiGLU [hidden, 2 * ffn]
    or its view [hidden, 2, ffn]; w2 [ffn, out]); ffn must divide by the size
    of ``axis``. batch_axis: a mesh axis that splits x's leading dimension.
    The remaining arguments go to each device's synced_mlp, which plans for
    its local shapes. Returns [..., out] like synced_mlp.
    """
    activation = check_activation(activation)
    slices = activation_slices(activation)
    hidden = np.shape(x)[-1] if np.ndim(x) else None
    if slices > 1 and np.ndim(w1) == 3:
        if np.shape(w1)[:2] != (hidden, slices):
            raise ValueError(f"w1: expected shape [hidden, ffn * {slices}] or its view "
                             f"[{hidden}, {slices}, ffn], got shape {np.shape(w1)}")
        w1 = jnp.reshape(w1, (hidden, -1))
    _, hidden, ffn, out, dtype = _validate(x, w1, w2, b1, b2, activation)
    shards = _axis_size(mesh, axis, "axis")
    if ffn % shards:
        raise ValueError(f"w1: ffn width {ffn} (w1 shape {np.shape(w1)}) must split evenly over "
                         f"the {shards} devices of mesh axis {axis!r}")
    lead = np.shape(x)[:-1]
    if batch_axis is not None:
        batches = _axis_size(mesh, batch_axis, "batch_axis")
        if batch_axis == axis:
            raise ValueError(f"batch_axis: must differ from axis ({axis!r})")
        if not lead or lead[0] % batches:
            raise ValueError(f"x: leading dimension must split evenly over the {batches} devices "
                             f"of mesh axis {batch_axis!r}, got shape {np.shape(x)}")

    # [hidden, slices, ffn]: splitting the last axis gives each device the
    # same columns of every slice (gate_i and up_i for SwiGLU).
    w1_view = jnp.reshape(w1, (hidden, slices, ffn))
    b1_view = jnp.reshape(jnp.zeros((slices * ffn,), dtype) if b1 is None else b1,
                          (slices, ffn))
    # x and y: leading dimension over batch_axis (if any), replicated over axis.
    rows = P(batch_axis, *([None] * (len(lead) - 1)), None) if lead else P(None)

    def local(x_i, w1_i, b1_i, w2_i):
        y_i = synced_mlp(x_i, jnp.reshape(w1_i, (hidden, -1)), w2_i,
                         b1=jnp.reshape(b1_i, (-1,)), activation=activation, policy=policy,
                         tile=tile, mode=mode, optimizations=optimizations, cpu=cpu)
        return jax.lax.psum(y_i, axis)

    # The primitive's abstract evaluation carries no varying-axes types, so
    # shard_map's type check is off; the psum above is the only collective.
    sharded = _shard_map(local, mesh=mesh,
                         in_specs=(rows, P(None, None, axis), P(None, axis), P(axis, None)),
                         out_specs=rows, **_NO_CHECK)
    y = sharded(x, w1_view, b1_view, w2)
    return y if b2 is None else y + b2
