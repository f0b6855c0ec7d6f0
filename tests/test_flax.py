"""cusync_jax.flax: the synced modules own the plain modules' parameters
(names, shapes, initial values) and compute the same function."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax")
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

import cusync_jax as cs  # noqa: E402
import cusync_jax.flax  # noqa: E402,F401
from cusync_jax.activations import apply_activation  # noqa: E402

ACTIVATIONS = ["gelu", "relu", "swiglu"]


def _random(seed, shape, dtype=jnp.float32):
    # numpy, not jax.random: XLA's CPU compile of rank-4 random draws is slow.
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, np.float32), dtype)


def _fast_conv_init(key, shape, dtype=jnp.float32):
    """lecun_normal drawn as a [fan_in, out] matrix (same fan-in as the HWIO
    kernel) and reshaped: avoids compiling a rank-4 random draw."""
    flat = nn.initializers.lecun_normal()(key, (int(np.prod(shape[:-1])), shape[-1]), dtype)
    return flat.reshape(shape)


def _perturbed(tree, seed):
    """Parameters plus noise, so that biases are non-zero."""
    return jax.tree.map(lambda a: a + 0.1 * _random(seed, a.shape), tree)


def _shapes(tree):
    return jax.tree.map(lambda a: (a.shape, a.dtype), tree)


def _same_params_perturbed(synced_params, plain_params, seed):
    """Checks that the synced module's parameters are the plain module's (same
    tree, shapes, dtypes and, from the same key, values), then returns the plain
    ones with noise: a checkpoint whose non-zero biases check their placement."""
    assert _shapes(synced_params) == _shapes(plain_params)
    jax.tree.map(np.testing.assert_array_equal, synced_params, plain_params)
    return _perturbed(plain_params, seed)


def _assert_close(got, want, dtype=jnp.float32):
    tol = {jnp.float32: 2e-5, jnp.bfloat16: 3e-2, jnp.float16: 5e-3}[dtype]
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                               rtol=tol, atol=tol)


# ---------------------------------------------------------------------- MLP
class PlainMLP(nn.Module):
    """What a model without cusync_jax writes."""
    ffn_features: int
    out_features: int
    activation: str
    dtype: object = None

    @nn.compact
    def __call__(self, x):
        width = self.ffn_features * (2 if self.activation == "swiglu" else 1)
        h = nn.Dense(width, dtype=self.dtype)(x)
        return nn.Dense(self.out_features, dtype=self.dtype)(apply_activation(self.activation, h))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_linen_mlp_matches_plain_dense_pair(activation):
    x, kp = _random(1, (3, 10, 32)), jax.random.key(1)
    plain = PlainMLP(96, 24, activation)
    synced = cs.flax.SyncedMLP(96, 24, activation=activation)
    plain_params = jax.jit(plain.init)(kp, x)
    synced_params = jax.jit(synced.init)(kp, x)
    params = _same_params_perturbed(synced_params, plain_params, 2)
    _assert_close(jax.jit(synced.apply)(params, x), plain.apply(params, x))


def test_linen_mlp_custom_names_load_named_checkpoint():
    class NamedPlain(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(8, name="fc2")(nn.relu(nn.Dense(64, name="fc1")(x)))

    x = _random(2, (16, 8))
    params = NamedPlain().init(jax.random.key(3), x)
    synced = cs.flax.SyncedMLP(64, activation="relu", names=("fc1", "fc2"))
    _assert_close(synced.apply(params, x), NamedPlain().apply(params, x))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_linen_mlp_half_precision_compute_dtype(dtype):
    x = _random(4, (64, 32))
    plain, synced = PlainMLP(64, 32, "gelu", dtype), cs.flax.SyncedMLP(64, dtype=dtype)
    params = jax.jit(plain.init)(jax.random.key(5), x)
    y = synced.apply(params, x)
    assert y.dtype == dtype
    _assert_close(y, plain.apply(params, x), dtype)


def test_linen_mlp_without_bias_and_bad_names():
    x = _random(6, (8, 16))
    synced = cs.flax.SyncedMLP(32, use_bias=False)
    params = synced.init(jax.random.key(7), x)
    assert set(params["params"]["Dense_0"]) == {"kernel"}
    p = params["params"]
    _assert_close(synced.apply(params, x),
                  cs.mlp_reference(x, p["Dense_0"]["kernel"], p["Dense_1"]["kernel"]))
    with pytest.raises(ValueError, match="names"):
        cs.flax.SyncedMLP(32, names=("a", "a")).init(jax.random.key(0), x)
    with pytest.raises(ValueError, match="activation"):
        cs.flax.SyncedMLP(32, activation="tanh").init(jax.random.key(0), x)


class PlainNnxMLP(nnx.Module):
    def __init__(self, din, ffn, dout, activation, rngs):
        width = ffn * (2 if activation == "swiglu" else 1)
        self.linear1 = nnx.Linear(din, width, rngs=rngs)
        self.linear2 = nnx.Linear(ffn, dout, rngs=rngs)
        self.activation = activation

    def __call__(self, x):
        return self.linear2(apply_activation(self.activation, self.linear1(x)))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_nnx_mlp_matches_plain_linear_pair(activation):
    x = _random(8, (2, 12, 32))
    plain = PlainNnxMLP(32, 96, 24, activation, nnx.Rngs(0))
    synced = cs.flax.nnx.SyncedMLP(32, 96, 24, activation=activation, rngs=nnx.Rngs(0))
    plain_state, synced_state = nnx.state(plain, nnx.Param), nnx.state(synced, nnx.Param)
    # A plain checkpoint with non-zero biases loads as it is.
    bumped = _same_params_perturbed(synced_state, plain_state, 9)
    nnx.update(plain, bumped)
    nnx.update(synced, bumped)
    _assert_close(nnx.jit(lambda m, x: m(x))(synced, x), plain(x))


def test_nnx_mlp_grad_matches_plain():
    x = _random(10, (16, 32))
    plain = PlainNnxMLP(32, 64, 32, "gelu", nnx.Rngs(1))
    synced = cs.flax.nnx.SyncedMLP(32, 64, rngs=nnx.Rngs(1))
    loss = lambda m: jnp.mean(m(x) ** 2)  # noqa: E731
    g_plain, g_synced = nnx.jit(nnx.grad(loss))(plain), nnx.jit(nnx.grad(loss))(synced)
    jax.tree.map(lambda a, b: _assert_close(a, b), nnx.state(g_synced), nnx.state(g_plain))


# ----------------------------------------------------------------- conv pair
class PlainConvPair(nn.Module):
    features: int
    out_features: int
    kernel_size: tuple
    second_kernel_size: tuple

    @nn.compact
    def __call__(self, x):
        h = nn.Conv(self.features, self.kernel_size, kernel_init=_fast_conv_init)(x)
        return nn.Conv(self.out_features, self.second_kernel_size,
                       kernel_init=_fast_conv_init)(nn.relu(h))


def test_conv_pair_default_initializers_are_the_plain_ones():
    # The tests below use a faster kernel initializer on both sides; the
    # defaults must still be nn.Conv's and nnx.Conv's.
    def default(signature_of, name):
        return inspect.signature(signature_of).parameters[name].default

    for name in ("kernel_init", "bias_init", "param_dtype"):
        assert (cs.flax.SyncedConvPair.__dataclass_fields__[name].default
                is nn.Conv.__dataclass_fields__[name].default), name
        assert (default(cs.flax.nnx.SyncedConvPair.__init__, name)
                is default(nnx.Conv.__init__, name)), name


def test_linen_conv_pair_matches_plain_conv_pair():
    # A 3x3 then a 1x1 window: both window sizes in one test (XLA's CPU conv
    # compiles slowly, so the plain model runs once).
    x, residual, key = _random(11, (2, 6, 6, 8)), _random(12, (2, 6, 6, 12)), jax.random.key(11)
    plain = PlainConvPair(16, 12, (3, 3), (1, 1))
    synced = cs.flax.SyncedConvPair(16, 12, kernel_size=3, second_kernel_size=1,
                                    kernel_init=_fast_conv_init)
    plain_params = jax.jit(plain.init)(key, x)
    synced_params = jax.jit(synced.init)(key, x)
    params = _same_params_perturbed(synced_params, plain_params, 13)
    want = jax.jit(plain.apply)(params, x)
    _assert_close(jax.jit(synced.apply)(params, x), want)
    _assert_close(jax.jit(synced.apply)(params, x, residual), want + residual)
    # ResNet's block ends in a ReLU after the residual: out_activation.
    block = synced.clone(out_activation="relu")
    _assert_close(jax.jit(block.apply)(params, x, residual), nn.relu(want + residual))


def test_linen_conv_pair_rejects_bad_window_and_rank():
    x = _random(14, (1, 4, 4, 8))
    with pytest.raises(ValueError, match="kernel_size"):
        cs.flax.SyncedConvPair(8, kernel_size=(5, 5)).init(jax.random.key(0), x)
    with pytest.raises(ValueError, match=r"x: expected an NHWC image.*\(4, 4, 8\)"):
        cs.flax.SyncedConvPair(8).init(jax.random.key(0), x[0])


class PlainNnxConvPair(nnx.Module):
    def __init__(self, cin, features, cout, rngs):
        self.conv1 = nnx.Conv(cin, features, (3, 3), kernel_init=_fast_conv_init, rngs=rngs)
        self.conv2 = nnx.Conv(features, cout, (3, 3), kernel_init=_fast_conv_init, rngs=rngs)

    def __call__(self, x, residual):
        return self.conv2(nnx.relu(self.conv1(x))) + residual


def test_nnx_conv_pair_matches_plain_conv_pair():
    x, residual = _random(15, (2, 5, 7, 8)), _random(16, (2, 5, 7, 8))
    plain = PlainNnxConvPair(8, 16, 8, nnx.Rngs(2))
    synced = cs.flax.nnx.SyncedConvPair(8, 16, 8, kernel_init=_fast_conv_init, rngs=nnx.Rngs(2))
    plain_state, synced_state = nnx.state(plain, nnx.Param), nnx.state(synced, nnx.Param)
    bumped = _same_params_perturbed(synced_state, plain_state, 17)
    nnx.update(plain, bumped)
    nnx.update(synced, bumped)
    _assert_close(nnx.jit(lambda m, x, r: m(x, r))(synced, x, residual), plain(x, residual))
    synced.out_activation = "relu"
    _assert_close(nnx.jit(lambda m, x, r: m(x, r))(synced, x, residual), nnx.relu(plain(x, residual)))
