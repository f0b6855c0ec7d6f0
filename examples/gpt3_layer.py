"""A GPT-3-style transformer layer whose MLP is cuSync-synced.

    x -> x + attention(ln1(x)) -> h + mlp(ln2(h))

Attention is plain JAX (a fused qkv projection, causal softmax attention, an
output projection). The MLP is ``cusync_jax.flax.SyncedMLP`` in the synced
layer and two ``nn.Dense`` in the plain one; the parameter trees are
identical, so both run on the same parameters.

Sizes: on a GPU the default is the paper's, one GPU of GPT-3 175B under 8-way
tensor parallelism (hidden 12288, 96 / 8 = 12 heads of 128, ffn 4 * 12288 / 8
= 6144, float16); on the CPU a small layer. Tensor-parallel all-reduces are
left out: this is one device's share of the layer.

    python examples/gpt3_layer.py                    # CPU: small; GPU: paper sizes
    python examples/gpt3_layer.py --tokens 1024 --dtype bfloat16
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax.flax as csflax
from example_timing import DTYPES, compare, model_parser


@dataclasses.dataclass(frozen=True)
class LayerSize:
    hidden: int
    heads: int      # heads on this device
    head_dim: int
    ffn: int        # MLP width on this device


PAPER = LayerSize(hidden=12288, heads=12, head_dim=128, ffn=6144)
SMALL = LayerSize(hidden=256, heads=4, head_dim=32, ffn=512)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(d) + causal mask) v over [batch, seq, heads, dim],
    the softmax in float32."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
    scores = scores / np.sqrt(q.shape[-1])
    seq = q.shape[1]
    mask = jnp.tril(jnp.ones((seq, seq), bool))
    probs = jax.nn.softmax(jnp.where(mask, scores, -jnp.inf), axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


class PlainMLP(nn.Module):
    """The MLP without cuSync: what SyncedMLP replaces (same parameter names)."""

    ffn_features: int
    dtype: object = None

    @nn.compact
    def __call__(self, x):
        h = nn.gelu(nn.Dense(self.ffn_features, dtype=self.dtype)(x), approximate=False)
        return nn.Dense(x.shape[-1], dtype=self.dtype)(h)


class GPT3Layer(nn.Module):
    size: LayerSize
    synced: bool
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, x):
        s = self.size
        b, t, _ = x.shape
        h = nn.LayerNorm(dtype=self.dtype, name="ln1")(x)
        qkv = nn.Dense(3 * s.heads * s.head_dim, dtype=self.dtype, name="qkv")(h)
        q, k, v = jnp.split(qkv.reshape(b, t, 3 * s.heads, s.head_dim), 3, axis=2)
        attn = causal_attention(q, k, v).reshape(b, t, s.heads * s.head_dim)
        x = x + nn.Dense(s.hidden, dtype=self.dtype, name="proj")(attn)
        h = nn.LayerNorm(dtype=self.dtype, name="ln2")(x)
        mlp = (csflax.SyncedMLP(s.ffn, activation="gelu", dtype=self.dtype, name="mlp")
               if self.synced else PlainMLP(s.ffn, dtype=self.dtype, name="mlp"))
        return x + mlp(h)


def init_params(size: LayerSize, batch: int, seq: int, dtype, seed: int = 0):
    """Parameters (in dtype) and an input, shared by the plain and the synced layer."""
    x = jax.random.normal(jax.random.key(seed), (batch, seq, size.hidden), jnp.float32)
    params = jax.jit(GPT3Layer(size, synced=False).init)(jax.random.key(seed + 1), x)
    return jax.tree.map(lambda a: a.astype(dtype), params), x.astype(dtype)


def main(argv=None):
    on_gpu = jax.default_backend() == "gpu"
    ap = model_parser(__doc__, on_gpu)
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 1024] if on_gpu else [64, 128],
                    help="tokens per sequence (one sequence: the paper's batch B)")
    ap.add_argument("--batch", type=int, default=1, help="sequences")
    args = ap.parse_args(argv)

    size, dtype = (PAPER if args.size == "paper" else SMALL), DTYPES[args.dtype]
    plain = jax.jit(GPT3Layer(size, synced=False, dtype=dtype).apply)
    synced = jax.jit(GPT3Layer(size, synced=True, dtype=dtype).apply)
    print(f"device {jax.devices()[0].device_kind}, {size}, {args.dtype}")
    print(f"{'tokens':>7}{'plain ms':>11}{'synced ms':>11}{'speedup':>9}{'max rel err':>13}")
    for tokens in args.tokens:
        params, x = init_params(size, args.batch, tokens, dtype)
        t_plain, t_synced, err = compare(plain, synced, params, x, reps=args.reps)
        print(f"{args.batch * tokens:>7}{t_plain:>11.3f}{t_synced:>11.3f}"
              f"{t_plain / t_synced:>9.3f}{err:>13.2e}")


if __name__ == "__main__":
    main()
