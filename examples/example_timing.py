"""Wall-clock timing shared by the examples (bench/ measures device time properly)."""
import time

import jax
import numpy as np


def median_ms(fn, *args, reps: int = 10) -> float:
    """Median milliseconds of a call, after one call that compiles and warms up."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times))
