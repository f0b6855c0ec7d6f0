"""Benchmark: the tensor-parallel synced MLP on several GPUs of one host.

GPT-3's MLP (hidden 12288, ffn 4 x 12288 = 49152, GELU) split Megatron-style
over all visible GPUs: w1 by columns, w2 by rows, one psum after the second
GEMM. Rows per (tokens, dtype):
  xla            the same shard_map with plain jax.nn ops
  synced         the synced MLP per shard, then psum, as tp_synced_mlp does; its
                 kernels always run (planned with allow_fallback=False)
  xla-chunked<C> / synced-chunked<C>
                 tokens split into C chunks, each chunk's psum issued as soon
                 as its MLP is done, so XLA's asynchronous all-reduce of chunk
                 i overlaps the GEMMs of chunk i + 1 (JAX collectives only)
Times: bench/timing.py (chained calls in one jitted loop, variants alternated
in rounds, medians). Writes bench/results/<device>x<N>-tp.json.

    python bench/tp.py --commit $(git rev-parse HEAD) --dirty 0
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import cusync_jax as cs
from cusync_jax.parallel import _NO_CHECK, _shard_map

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import timing  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOKENS = (256, 512, 1024, 2048, 3072, 4096)
DTYPES = {"float16": jnp.float16, "bfloat16": jnp.bfloat16}


def planner_device():
    device = jax.devices()[0]
    return cs.planner.device_model(device) if device.platform == "gpu" else "cpu"


def mlp_step(mesh, synced: bool, chunks: int):
    """x -> psum over 'model' of the local MLP, as a jitted shard_map."""

    def local(x, w1, w2):
        def mlp(xc):
            if synced:
                # The synced kernels as auto plans them, even where auto would
                # fall back to XLA's ops: this row measures the kernels.
                plan = cs.plan_mlp(xc.shape[0], w1.shape[0], w1.shape[1], w2.shape[1],
                                   activation="gelu", device=planner_device(),
                                   dtype=xc.dtype, allow_fallback=False).plan
                return cs.synced_mlp(xc, w1, w2, activation="gelu", plan=plan)
            return jax.nn.gelu(xc @ w1, approximate=False) @ w2

        parts = [jax.lax.psum(mlp(xc), "model") for xc in jnp.split(x, chunks, axis=0)]
        return parts[0] if chunks == 1 else jnp.concatenate(parts, axis=0)

    return _shard_map(local, mesh=mesh, in_specs=(P(), P(None, "model"), P("model", None)),
                      out_specs=P(), **_NO_CHECK)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    ap.add_argument("--dtype", nargs="+", default=["float16"], choices=sorted(DTYPES))
    ap.add_argument("--hidden", type=int, default=12288)
    ap.add_argument("--ffn", type=int, default=4 * 12288, help="total ffn width, split over the GPUs")
    ap.add_argument("--chunks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--commit", default=None)
    ap.add_argument("--dirty", default=None, choices=["0", "1"])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    devices = jax.devices()
    gpus = len(devices)
    mesh = Mesh(np.array(devices), ("model",))
    commit, dirty = timing.git_state(ROOT)
    commit = args.commit or commit
    dirty = bool(int(args.dirty)) if args.dirty is not None else dirty
    rows = []
    for dname in args.dtype:
        dtype = DTYPES[dname]
        k1, k2 = jax.random.split(jax.random.key(0))
        w1 = jax.device_put((jax.random.normal(k1, (args.hidden, args.ffn)) / args.hidden ** 0.5
                             ).astype(dtype), NamedSharding(mesh, P(None, "model")))
        # Scaled so y keeps x's spread: a chain of calls stays finite.
        w2 = jax.device_put((jax.random.normal(k2, (args.ffn, args.hidden)) * 1.6 / args.ffn ** 0.5
                             ).astype(dtype), NamedSharding(mesh, P("model", None)))
        for tokens in args.tokens:
            x = jax.device_put(jax.random.normal(jax.random.key(tokens), (tokens, args.hidden), dtype),
                               NamedSharding(mesh, P()))
            flops = 4.0 * tokens * args.hidden * args.ffn / gpus
            iters = timing.iterations_for(flops / 500e12 * 1e3)
            variants = {}
            for synced in (False, True):
                for chunks in [1] + [c for c in args.chunks if tokens % c == 0 and tokens // c >= 128]:
                    name = ("synced" if synced else "xla") + (f"-chunked{chunks}" if chunks > 1 else "")
                    step = mlp_step(mesh, synced, chunks)
                    variants[name] = (timing.chained(step, iters), (x, w1, w2), iters)
            times = timing.alternate(variants, args.rounds)
            base = times["xla"]
            for name, ms in times.items():
                rows.append(dict(model="gpt3", dtype=dname, tokens=tokens, impl=name, ms=round(ms, 5),
                                 gpus=gpus))
                print(f"{dname:9s} {tokens:5d} {name:18s} {ms:8.4f} ms  {base / ms:5.3f}x xla",
                      flush=True)

    slug = timing.device_slug(devices[0])
    out = pathlib.Path(args.out or ROOT / "bench" / "results" / f"{slug}x{gpus}-tp.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dict(
        commit=commit, dirty=dirty, device=devices[0].device_kind, gpus=gpus, jax=jax.__version__,
        # (wall time of chained launches: the busy time of several GPUs is not one number)
        timing="loop",
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), rows=rows), indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
