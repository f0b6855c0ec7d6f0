"""A small synced MLP for compute-sanitizer (run by test_gpu_mlp.py).

Inputs and the reference are computed on the CPU so that the only GPU
kernels are this project's (XLA's GEMM autotuning does not run under the
sanitizers). Serial and fused modes only: the sanitizers may serialize
kernels, and in streams mode a consumer kernel run to completion before its
producer starts would wait forever (the fused schedule cannot deadlock in any
order)."""
import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax as cs
from helpers import TOL, mlp_inputs

cpu, gpu = jax.devices("cpu")[0], jax.devices("gpu")[0]
for activation, policies in (("gelu", ("tilesync", "rowsync")), ("swiglu", ("stridedsync",))):
    with jax.default_device(cpu):
        ops = mlp_inputs(3, 130, 128, 136, 136, jnp.float16, swiglu=activation == "swiglu")
        x, w1, w2, b1, b2 = ops
        want = np.asarray(cs.mlp_reference(x, w1, w2, b1=b1, b2=b2, activation=activation))
    x, w1, w2, b1, b2 = jax.device_put(ops, gpu)
    for mode in ("serial", "fused"):
        for policy in policies:
            y = jax.jit(lambda x: cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, activation=activation,
                                                mode=mode, policy=policy, tile=(128, 128, 32)))(x)
            got = np.asarray(y).astype(np.float32)
            assert np.all(np.isfinite(got)), (activation, mode, policy)
            err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            assert err < TOL[jnp.float16], (activation, mode, policy, err)
print("sanitizer case: ok")
