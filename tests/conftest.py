"""Shared test setup: the `gpu` marker skips (never fails) where no CUDA GPU
or no CUDA backend is available."""
import functools

import jax
import pytest


@functools.cache
def _gpu_available() -> bool:
    try:
        if not jax.devices("gpu"):
            return False
    except RuntimeError:
        return False
    import cusync_jax
    return cusync_jax.cuda_built()


def pytest_collection_modifyitems(config, items):
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and cusync_jax's CUDA backend")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
