"""What the model examples share: their command-line flags, and one comparison
of the plain and the synced model (wall-clock time; bench/ measures device
time properly)."""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def median_ms(fn, *args, reps: int = 10) -> float:
    """Median milliseconds of a call, after one call that compiles and warms up."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))


def model_parser(description: str, on_gpu: bool) -> argparse.ArgumentParser:
    """The flags every model example takes: paper sizes and float16 on a GPU,
    a small model in float32 on the CPU."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=["paper", "small"], default="paper" if on_gpu else "small")
    ap.add_argument("--dtype", choices=list(DTYPES), default="float16" if on_gpu else "float32")
    ap.add_argument("--reps", type=int, default=10)
    return ap


def compare(plain, synced, *args, reps: int = 10):
    """(plain ms, synced ms, max |synced - plain| / max |plain|) on the same arguments."""
    want = jnp.asarray(plain(*args), jnp.float32)
    got = jnp.asarray(synced(*args), jnp.float32)
    err = float(jnp.max(jnp.abs(got - want)) / jnp.max(jnp.abs(want)))
    return median_ms(plain, *args, reps=reps), median_ms(synced, *args, reps=reps), err
