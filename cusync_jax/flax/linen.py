"""Flax linen modules whose forward pass is one synced op.

Parameters live in child modules named like the plain layers they replace
(``Dense_0``/``Dense_1``, ``Conv_0``/``Conv_1``: the names linen gives two
unnamed ``nn.Dense``/``nn.Conv`` in a compact method), each holding ``kernel``
and ``bias`` of the same shape, dtype and initializer. A plain model's
parameters therefore load unchanged, and ``init`` with the same key even draws
the same values. Other names (``("fc1", "fc2")``, ...) go in ``names``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import flax.linen as nn
import jax.numpy as jnp
from flax.linen.dtypes import promote_dtype
from flax.linen.linear import default_kernel_init

from ..activations import activation_slices, check_activation
from ..conv import synced_conv_pair
from ..mlp import synced_mlp
from ..policies import Optimizations
from ._checks import check_names, conv_window

Initializer = Callable[..., Any]


class _DenseParams(nn.Module):
    """The parameters of an ``nn.Dense`` (same names, shapes, initializers),
    without its matmul: the synced op does that."""

    features: int
    use_bias: bool
    param_dtype: Any
    kernel_init: Initializer
    bias_init: Initializer

    @nn.compact
    def __call__(self, in_features: int):
        kernel = self.param("kernel", self.kernel_init, (in_features, self.features),
                            self.param_dtype)
        bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
                if self.use_bias else None)
        return kernel, bias


class _ConvParams(nn.Module):
    """The parameters of an ``nn.Conv`` (HWIO kernel, bias), without the conv."""

    features: int
    kernel_size: tuple
    use_bias: bool
    param_dtype: Any
    kernel_init: Initializer
    bias_init: Initializer

    @nn.compact
    def __call__(self, in_features: int):
        kernel = self.param("kernel", self.kernel_init,
                            tuple(self.kernel_size) + (in_features, self.features),
                            self.param_dtype)
        bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
                if self.use_bias else None)
        return kernel, bias



class SyncedMLP(nn.Module):
    """``Dense_1(act(Dense_0(x)))`` as one ``synced_mlp``.

    Plain equivalent (its parameters load as they are)::

        h = nn.Dense(ffn_features * slices)(x)   # "Dense_0"; slices = 2 for swiglu
        y = nn.Dense(out_features)(act(h))       # "Dense_1"

    For ``activation="swiglu"`` the first Dense has ``2 * ffn_features``
    columns, ``[gate | up]``, and ``act(h) = silu(gate) * up``.

    ffn_features: width of the intermediate activation.
    out_features: output width; None keeps the input's last dimension.
    dtype: computation dtype (None: the promoted dtype of input and params, as
    nn.Dense). policy, tile, mode, optimizations: passed to ``synced_mlp``
    (with all of them automatic on a GPU, shapes where XLA's own ops measured
    faster run as plain jnp: see ``cusync_jax.plan_mlp``).
    """

    ffn_features: int
    out_features: Optional[int] = None
    activation: str = "gelu"
    use_bias: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Initializer = default_kernel_init
    bias_init: Initializer = nn.initializers.zeros_init()
    names: Sequence[str] = ("Dense_0", "Dense_1")
    policy: Any = "auto"
    tile: Any = None
    mode: str = "auto"
    optimizations: Optional[Optimizations] = None

    @nn.compact
    def __call__(self, x):
        activation = check_activation(self.activation)
        first, second = check_names(self.names)
        if jnp.ndim(x) < 1:
            raise ValueError(f"x: expected shape [..., features], got shape {jnp.shape(x)}")
        out = self.out_features or jnp.shape(x)[-1]
        common = dict(use_bias=self.use_bias, param_dtype=self.param_dtype,
                      kernel_init=self.kernel_init, bias_init=self.bias_init)
        w1, b1 = _DenseParams(self.ffn_features * activation_slices(activation), **common,
                              name=first)(jnp.shape(x)[-1])
        w2, b2 = _DenseParams(out, **common, name=second)(self.ffn_features)
        x, w1, b1, w2, b2 = promote_dtype(x, w1, b1, w2, b2, dtype=self.dtype)
        return synced_mlp(x, w1, w2, b1=b1, b2=b2, activation=activation, policy=self.policy,
                          tile=self.tile, mode=self.mode, optimizations=self.optimizations)


class SyncedConvPair(nn.Module):
    """``out_act(Conv_1(act(Conv_0(x))) (+ residual))`` as one
    ``synced_conv_pair`` (NHWC input, stride 1, SAME padding).

    Plain equivalent (its parameters load as they are)::

        h = nn.Conv(features, kernel_size, padding="SAME")(x)          # "Conv_0"
        y = nn.Conv(out_features, kernel_size, padding="SAME")(act(h))  # "Conv_1"
        y = y + residual                                                 # if given
        y = out_act(y)                                                   # ResNet: nn.relu

    features: channels of the intermediate; out_features: output channels
    (None: ``features``). kernel_size: both convs' window, (3, 3) or (1, 1)
    (an int means square); second_kernel_size: Conv_1's, when it differs.
    out_activation: applied last ("identity": none; ResNet's block ends in
    "relu", which the halo conv applies in its epilogue).
    dtype: computation dtype (None: the promoted dtype of input and params).
    policy, tile, mode, optimizations: passed to ``synced_conv_pair``.
    """

    features: int
    out_features: Optional[int] = None
    kernel_size: Any = (3, 3)
    second_kernel_size: Any = None
    activation: str = "relu"
    use_bias: bool = True
    dtype: Any = None
    param_dtype: Any = jnp.float32
    kernel_init: Initializer = default_kernel_init
    bias_init: Initializer = nn.initializers.zeros_init()
    names: Sequence[str] = ("Conv_0", "Conv_1")
    out_activation: str = "identity"
    policy: Any = "auto"
    tile: Any = None
    mode: str = "auto"
    optimizations: Optional[Optimizations] = None

    @nn.compact
    def __call__(self, x, residual=None):
        first, second = check_names(self.names)
        if jnp.ndim(x) != 4:
            raise ValueError(f"x: expected an NHWC image of shape [batch, height, width, "
                             f"channels], got shape {jnp.shape(x)}")
        size1 = conv_window(self.kernel_size, "kernel_size")
        size2 = conv_window(self.second_kernel_size or self.kernel_size,
                                  "second_kernel_size")
        common = dict(use_bias=self.use_bias, param_dtype=self.param_dtype,
                      kernel_init=self.kernel_init, bias_init=self.bias_init)
        k1, b1 = _ConvParams(self.features, size1, **common, name=first)(jnp.shape(x)[-1])
        k2, b2 = _ConvParams(self.out_features or self.features, size2, **common,
                             name=second)(self.features)
        if residual is None:
            x, k1, b1, k2, b2 = promote_dtype(x, k1, b1, k2, b2, dtype=self.dtype)
        else:
            x, k1, b1, k2, b2, residual = promote_dtype(x, k1, b1, k2, b2, residual,
                                                        dtype=self.dtype)
        return synced_conv_pair(x, k1, k2, b1=b1, b2=b2, activation=self.activation,
                                residual=residual, out_activation=self.out_activation,
                                policy=self.policy, tile=self.tile,
                                mode=self.mode, optimizations=self.optimizations)
