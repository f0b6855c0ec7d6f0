"""flax.nnx modules whose forward pass is one synced op.

Each holds its parameters in plain ``nnx.Linear`` / ``nnx.Conv`` submodules
(``linear1``/``linear2``, ``conv1``/``conv2``), created in that order from
the same ``rngs`` streams as a plain model would, so the state of a plain
module with those attribute names loads as it is (``nnx.update(synced,
nnx.state(plain))``), and the same ``Rngs`` seed draws the same values. The
submodules stay usable on their own (``mlp.linear1(x)``); only ``__call__``
fuses them.
"""
from __future__ import annotations

from typing import Any, Optional

import jax.numpy as jnp
from flax import nnx
from flax.nnx.nn.dtypes import promote_dtype
from flax.nnx.nn.linear import default_kernel_init

from ..activations import activation_slices, check_activation
from ..conv import synced_conv_pair
from ..mlp import synced_mlp
from ..policies import Optimizations
from ._checks import conv_window


class SyncedMLP(nnx.Module):
    """``linear2(act(linear1(x)))`` as one ``synced_mlp``.

    Plain equivalent (its state loads as it is)::

        self.linear1 = nnx.Linear(in_features, ffn_features * slices, rngs=rngs)
        self.linear2 = nnx.Linear(ffn_features, out_features, rngs=rngs)
        y = self.linear2(act(self.linear1(x)))

    For ``activation="swiglu"`` (slices = 2) linear1 has ``2 * ffn_features``
    columns, ``[gate | up]``, and ``act(h) = silu(gate) * up``.
    out_features defaults to in_features. dtype: computation dtype (None: the
    promoted dtype of input and params). policy, tile, mode, optimizations:
    passed to ``synced_mlp``.
    """

    def __init__(self, in_features: int, ffn_features: int, out_features: Optional[int] = None,
                 *, activation: str = "gelu", use_bias: bool = True, dtype: Any = None,
                 param_dtype: Any = jnp.float32, kernel_init=default_kernel_init,
                 bias_init=nnx.initializers.zeros_init(), policy: Any = "auto", tile: Any = None,
                 mode: str = "auto", optimizations: Optional[Optimizations] = None,
                 rngs: nnx.Rngs):
        self.activation = check_activation(activation)
        common = dict(use_bias=use_bias, dtype=dtype, param_dtype=param_dtype,
                      kernel_init=kernel_init, bias_init=bias_init, rngs=rngs)
        self.linear1 = nnx.Linear(in_features, ffn_features * activation_slices(activation),
                                  **common)
        self.linear2 = nnx.Linear(ffn_features, out_features or in_features, **common)
        self.dtype = dtype
        self.policy, self.tile, self.mode, self.optimizations = policy, tile, mode, optimizations

    def __call__(self, x):
        w1, w2 = self.linear1.kernel[...], self.linear2.kernel[...]
        b1 = None if self.linear1.bias is None else self.linear1.bias[...]
        b2 = None if self.linear2.bias is None else self.linear2.bias[...]
        x, w1, b1, w2, b2 = promote_dtype((x, w1, b1, w2, b2), dtype=self.dtype)
        return synced_mlp(x, w1, w2, b1=b1, b2=b2, activation=self.activation, policy=self.policy,
                          tile=self.tile, mode=self.mode, optimizations=self.optimizations)


class SyncedConvPair(nnx.Module):
    """``out_act(conv2(act(conv1(x))) (+ residual))`` as one
    ``synced_conv_pair`` (NHWC input, HWIO kernels, stride 1, SAME padding).

    Plain equivalent (its state loads as it is)::

        self.conv1 = nnx.Conv(in_features, features, kernel_size, padding="SAME", rngs=rngs)
        self.conv2 = nnx.Conv(features, out_features, kernel_size, padding="SAME", rngs=rngs)
        y = out_act(self.conv2(act(self.conv1(x))) + residual)

    out_features defaults to features. out_activation: applied last
    ("identity": none; ResNet's block ends in "relu", which the halo conv
    applies in its epilogue). kernel_size: (3, 3) or (1, 1) (an int
    means square) for both convs; second_kernel_size: conv2's, when it differs.
    policy, tile, mode, optimizations: passed to ``synced_conv_pair``.
    """

    def __init__(self, in_features: int, features: int, out_features: Optional[int] = None,
                 kernel_size: Any = (3, 3), *, second_kernel_size: Any = None,
                 activation: str = "relu", use_bias: bool = True, dtype: Any = None,
                 param_dtype: Any = jnp.float32, kernel_init=default_kernel_init,
                 bias_init=nnx.initializers.zeros_init(), policy: Any = "auto",
                 tile: Any = None, mode: str = "auto",
                 optimizations: Optional[Optimizations] = None, out_activation: str = "identity",
                 rngs: nnx.Rngs):
        size1 = conv_window(kernel_size, "kernel_size")
        size2 = conv_window(second_kernel_size or kernel_size, "second_kernel_size")
        common = dict(padding="SAME", use_bias=use_bias, dtype=dtype, param_dtype=param_dtype,
                      kernel_init=kernel_init, bias_init=bias_init, rngs=rngs)
        self.conv1 = nnx.Conv(in_features, features, size1, **common)
        self.conv2 = nnx.Conv(features, out_features or features, size2, **common)
        self.activation, self.out_activation, self.dtype = activation, out_activation, dtype
        self.policy, self.tile, self.mode, self.optimizations = policy, tile, mode, optimizations

    def __call__(self, x, residual=None):
        if jnp.ndim(x) != 4:
            raise ValueError(f"x: expected an NHWC image of shape [batch, height, width, "
                             f"channels], got shape {jnp.shape(x)}")
        k1, k2 = self.conv1.kernel[...], self.conv2.kernel[...]
        b1 = None if self.conv1.bias is None else self.conv1.bias[...]
        b2 = None if self.conv2.bias is None else self.conv2.bias[...]
        x, k1, b1, k2, b2, residual = promote_dtype((x, k1, b1, k2, b2, residual),
                                                    dtype=self.dtype)
        return synced_conv_pair(x, k1, k2, b1=b1, b2=b2, activation=self.activation,
                                residual=residual, out_activation=self.out_activation,
                                policy=self.policy, tile=self.tile,
                                mode=self.mode, optimizations=self.optimizations)
