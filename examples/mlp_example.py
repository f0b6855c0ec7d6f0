"""The main example: swap `gelu(x @ w1) @ w2` for `cusync_jax.synced_mlp`.

Runs on whatever JAX's default device is: small shapes on the CPU (the tile
executor), the GPT-3 MLP shape of the paper on a GPU.
"""
import dataclasses

import jax
import jax.numpy as jnp

import cusync_jax as cs
from example_timing import median_ms


def main():
    on_gpu = jax.default_backend() == "gpu"
    tokens, hidden, ffn = (1024, 12288, 6144) if on_gpu else (256, 512, 1024)
    dtype = jnp.float16 if on_gpu else jnp.float32
    kx, k1, k2 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (tokens, hidden), dtype)
    w1 = (jax.random.normal(k1, (hidden, ffn)) / hidden ** 0.5).astype(dtype)
    w2 = (jax.random.normal(k2, (ffn, hidden)) / ffn ** 0.5).astype(dtype)

    plain = jax.jit(lambda x, w1, w2: jax.nn.gelu(x @ w1, approximate=False) @ w2)
    auto = jax.jit(lambda x, w1, w2: cs.synced_mlp(x, w1, w2, activation="gelu"))

    device = cs.planner.device_model(jax.devices()[0]) if on_gpu else "cpu"
    report = cs.plan_mlp(tokens, hidden, ffn, device=device, dtype=dtype)
    # The synced kernels as auto would run them, even where XLA's ops won.
    forced = dataclasses.replace(report.plan, fallback=False)
    kernels = jax.jit(lambda x, w1, w2: cs.synced_mlp(x, w1, w2, activation="gelu", plan=forced))
    print(f"device: {jax.devices()[0].device_kind}  x {x.shape} {x.dtype}, w1 {w1.shape}, w2 {w2.shape}")
    print(f"plan: tiles {report.tile1.m}x{report.tile1.n} / {report.tile2.m}x{report.tile2.n}, "
          f"{report.tiles1} + {report.tiles2} tiles, policy {report.policy}, mode {report.mode} "
          f"(chosen by: {report.source})")
    print(f"wave model ({report.slots} slots): {report.waves_stream} waves in stream order, "
          f"{report.waves_synced} synchronized")
    if report.fallback:
        print("auto falls back to XLA's own ops for this shape (they were faster); "
              "the synced kernels are timed below as well")

    ref = cs.mlp_reference(x, w1, w2, activation="gelu")
    for name, fn in (("auto", auto), ("kernels", kernels)):
        y = fn(x, w1, w2)
        err = float(jnp.max(jnp.abs(y.astype(jnp.float32) - ref)) / jnp.max(jnp.abs(ref)))
        print(f"{name}: max error relative to max |y|: {err:.2e}")
    print(f"plain jax     : {median_ms(plain, x, w1, w2):8.3f} ms")
    print(f"synced (auto) : {median_ms(auto, x, w1, w2):8.3f} ms")
    print(f"synced kernels: {median_ms(kernels, x, w1, w2):8.3f} ms")


if __name__ == "__main__":
    main()
