"""Training with the synced ops: gradients through the Flax modules and
through remat match the plain models, and short optax loops follow the
plain models' loss curves."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("flax")
optax = pytest.importorskip("optax")
import flax.linen as nn  # noqa: E402
from flax import nnx  # noqa: E402

import cusync_jax as cs  # noqa: E402
import cusync_jax.flax  # noqa: E402,F401
from cusync_jax.activations import apply_activation  # noqa: E402
from helpers import mlp_inputs, rel_err  # noqa: E402

ACTIVATIONS = ("gelu", "swiglu")  # one per block: a one-slice and a two-slice producer


def _random(seed, shape):
    # numpy, not jax.random: XLA's CPU compile of rank-4 random draws is slow.
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, np.float32))


def _fast_conv_init(key, shape, dtype=jnp.float32):
    """lecun_normal drawn as a [fan_in, out] matrix and reshaped to HWIO."""
    flat = nn.initializers.lecun_normal()(key, (int(np.prod(shape[:-1])), shape[-1]), dtype)
    return flat.reshape(shape)


def _assert_curves_match(synced, plain):
    synced, plain = np.asarray(synced), np.asarray(plain)
    np.testing.assert_allclose(synced, plain, rtol=2e-3, atol=1e-5)
    assert plain[-1] < 0.5 * plain[0], f"the loop did not train: {plain}"


def _assert_grads_match(synced, plain, tol=1e-4):
    flat_plain = dict(jax.tree_util.tree_leaves_with_path(plain))
    for path, g in jax.tree_util.tree_leaves_with_path(synced):
        assert rel_err(g, flat_plain[path]) < tol, jax.tree_util.keystr(path)


# ---------------------------------------------------------------- linen MLP
class PlainMLP(nn.Module):
    ffn_features: int
    activation: str

    @nn.compact
    def __call__(self, x):
        width = self.ffn_features * (2 if self.activation == "swiglu" else 1)
        h = apply_activation(self.activation, nn.Dense(width)(x))
        return nn.Dense(x.shape[-1])(h)


class ResidualMLPNet(nn.Module):
    """Embedding, pre-norm residual MLP blocks, a linear head."""
    synced: bool

    @nn.compact
    def __call__(self, x):
        x = nn.Dense(32, name="embed")(x)
        for i, activation in enumerate(ACTIVATIONS):
            mlp = (cs.flax.SyncedMLP(48, activation=activation, name=f"mlp{i}") if self.synced
                   else PlainMLP(48, activation, name=f"mlp{i}"))
            x = x + mlp(nn.LayerNorm(name=f"norm{i}")(x))
        return nn.Dense(4, name="head")(x)


def test_optax_loop_linen_mlp_follows_plain_grads_and_loss_curve():
    x = _random(0, (64, 16))
    y = jnp.tanh(x @ _random(1, (16, 4)))
    params0 = jax.jit(ResidualMLPNet(False).init)(jax.random.key(2), x)
    tx = optax.adam(1e-2)

    def train(model, steps=30):
        @jax.jit
        def step(params, opt_state):
            loss, grads = jax.value_and_grad(
                lambda p: jnp.mean((model.apply(p, x) - y) ** 2))(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss, grads

        params, opt_state, losses, first_grads = params0, tx.init(params0), [], None
        for _ in range(steps):
            params, opt_state, loss, grads = step(params, opt_state)
            first_grads = grads if first_grads is None else first_grads
            losses.append(float(loss))
        return losses, first_grads

    synced_losses, synced_grads = train(ResidualMLPNet(True))
    plain_losses, plain_grads = train(ResidualMLPNet(False))
    _assert_grads_match(synced_grads, plain_grads)
    _assert_curves_match(synced_losses, plain_losses)


def test_remat_grads_match_jnp():
    # Rematerialized blocks (jax.checkpoint) replay the forward pass inside
    # the backward pass; the primitive must survive that.
    x, w1, w2, b1, b2 = mlp_inputs(3, 32, 16, 32, 16, jnp.float32)

    def stack(mlp):
        block = jax.checkpoint(lambda h: h + mlp(h, w1, w2, b1=b1, b2=b2))
        return lambda x: jnp.sum(jnp.sin(block(block(x))))

    got = jax.jit(jax.grad(stack(cs.synced_mlp)))(x)
    want = jax.jit(jax.grad(stack(cs.mlp_reference)))(x)
    assert rel_err(got, want) < 1e-4


# ----------------------------------------------------------- nnx conv pair
class PlainConvPair(nnx.Module):
    def __init__(self, cin, features, cout, *, kernel_init, rngs):
        self.conv1 = nnx.Conv(cin, features, (3, 3), kernel_init=kernel_init, rngs=rngs)
        self.conv2 = nnx.Conv(features, cout, (3, 3), kernel_init=kernel_init, rngs=rngs)

    def __call__(self, x, residual):
        return self.conv2(nnx.relu(self.conv1(x))) + residual


class ConvNet(nnx.Module):
    """A residual conv-pair block (plain or synced), pooled, a linear head."""

    def __init__(self, synced: bool, rngs: nnx.Rngs):
        pair = cs.flax.nnx.SyncedConvPair if synced else PlainConvPair
        self.block = pair(8, 12, 8, kernel_init=_fast_conv_init, rngs=rngs)
        self.head = nnx.Linear(8, 3, rngs=rngs)

    def __call__(self, x):
        h = nnx.relu(self.block(x, residual=x))
        return self.head(jnp.mean(h, axis=(1, 2)))


def test_optax_loop_nnx_conv_pair_follows_plain_grads_and_loss_curve():
    x, y = _random(4, (4, 6, 6, 8)), _random(5, (4, 3))

    def train(synced, steps=15):
        model = ConvNet(synced, nnx.Rngs(6))
        optimizer = nnx.Optimizer(model, optax.adam(3e-2), wrt=nnx.Param)

        @nnx.jit
        def step(model, optimizer):
            loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
            optimizer.update(model, grads)
            return loss, grads

        losses, first_grads = [], None
        for _ in range(steps):
            loss, grads = step(model, optimizer)
            first_grads = grads if first_grads is None else first_grads
            losses.append(float(loss))
        return losses, nnx.to_pure_dict(first_grads)

    synced_losses, synced_grads = train(True)
    plain_losses, plain_grads = train(False)
    _assert_grads_match(synced_grads, plain_grads)
    _assert_curves_match(synced_losses, plain_losses)


@pytest.mark.parametrize("activation", ["relu", "gelu", "identity"])
def test_second_order_derivatives_match_jnp(activation):
    # grad of grad, and a Hessian (forward over reverse): the op's JVP rule
    # differentiates the forward pass inside the first gradient.
    k = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(k[0], (3, 8))
    w1 = jax.random.normal(k[1], (8, 16)) * 0.3
    w2 = jax.random.normal(k[2], (16, 8)) * 0.3
    def loss(mlp):
        return lambda x, w1: (mlp(x, w1, w2, activation=activation) ** 2).sum()
    ours, plain = loss(cs.synced_mlp), loss(cs.mlp_reference)
    gg = lambda f: jax.grad(lambda w1: jax.grad(f)(x, w1).sum())(w1)  # noqa: E731
    np.testing.assert_allclose(gg(ours), gg(plain), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(jax.hessian(ours)(x, w1), jax.hessian(plain)(x, w1), rtol=1e-4, atol=1e-4)


def test_conv_pair_second_order_derivatives_match_jnp():
    k = jax.random.split(jax.random.key(8), 3)
    x = jax.random.normal(k[0], (2, 5, 5, 4))
    k1 = jax.random.normal(k[1], (3, 3, 4, 6)) * 0.2
    k2 = jax.random.normal(k[2], (3, 3, 6, 4)) * 0.2
    def gg(pair):
        inner = jax.grad(lambda x, k1: (pair(x, k1, k2) ** 2).sum())
        return jax.grad(lambda k1: inner(x, k1).sum())(k1)
    np.testing.assert_allclose(gg(cs.synced_conv_pair), gg(cs.conv_pair_reference), rtol=1e-4, atol=1e-3)


def test_vmap_over_empty_batches():
    w1, w2 = jnp.ones((8, 16)) * 0.1, jnp.ones((16, 8)) * 0.1
    for shape in ((3, 0, 8), (0, 5, 8)):
        assert jax.vmap(lambda x: cs.synced_mlp(x, w1, w2))(jnp.ones(shape)).shape == shape
    k = jnp.ones((3, 3, 4, 4)) * 0.1
    assert jax.vmap(lambda x: cs.synced_conv_pair(x, k, k))(jnp.ones((0, 2, 5, 5, 4))).shape == (0, 2, 5, 5, 4)
