"""Helpers shared by the CPU tests: random inputs and tolerances by dtype."""
import jax
import jax.numpy as jnp
import numpy as np

TOL = {jnp.float32: 2e-5, jnp.float16: 1e-2, jnp.bfloat16: 4e-2}


def mlp_inputs(seed, tokens, hidden, ffn, out, dtype, swiglu=False, bias=True, lead=None):
    """Fresh random MLP operands, scaled so activations stay O(1)."""
    ks = jax.random.split(jax.random.key(seed), 5)
    width = 2 * ffn if swiglu else ffn
    shape = (lead or ()) + (tokens, hidden)
    x = jax.random.normal(ks[0], shape, jnp.float32)
    w1 = jax.random.normal(ks[1], (hidden, width), jnp.float32) / np.sqrt(hidden)
    w2 = jax.random.normal(ks[2], (ffn, out), jnp.float32) / np.sqrt(ffn)
    b1 = jax.random.normal(ks[3], (width,), jnp.float32) * 0.1 if bias else None
    b2 = jax.random.normal(ks[4], (out,), jnp.float32) * 0.1 if bias else None
    cast = lambda a: None if a is None else a.astype(dtype)
    return cast(x), cast(w1), cast(w2), cast(b1), cast(b2)


def rel_err(got, want):
    """max |got - want| / max |want|, in float32."""
    got = np.asarray(jnp.asarray(got, jnp.float32))
    want = np.asarray(jnp.asarray(want, jnp.float32))
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), "non-finite values in the result"
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def conv_inputs(seed, n, h, w, c0, c1, c2, dtype, f1=3, f2=3, bias=True, residual=False, lead=None):
    """Fresh random conv-pair operands (NHWC x, HWIO k1 and k2, biases, an
    optional residual), scaled so activations stay O(1)."""
    ks = jax.random.split(jax.random.key(seed), 6)
    lead = lead or ()
    x = jax.random.normal(ks[0], lead + (n, h, w, c0), jnp.float32)
    k1 = jax.random.normal(ks[1], (f1, f1, c0, c1), jnp.float32) / np.sqrt(f1 * f1 * c0)
    k2 = jax.random.normal(ks[2], (f2, f2, c1, c2), jnp.float32) / np.sqrt(f2 * f2 * c1)
    b1 = jax.random.normal(ks[3], (c1,), jnp.float32) * 0.1 if bias else None
    b2 = jax.random.normal(ks[4], (c2,), jnp.float32) * 0.1 if bias else None
    res = jax.random.normal(ks[5], lead + (n, h, w, c2), jnp.float32) if residual else None
    cast = lambda a: None if a is None else a.astype(dtype)
    return cast(x), cast(k1), cast(k2), cast(b1), cast(b2), cast(res)
