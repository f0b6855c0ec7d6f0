"""The Hopper GEMM alone (cusync_jax.gemm.gemm, what bench/gemm.py times)
against a float32 reference: ragged shapes, both tile widths, every tile
order it takes. Skipped (not failed) without a GPU and the CUDA backend; on
a GPU other than Hopper it must refuse clearly."""
import jax
import jax.numpy as jnp
import pytest

from cusync_jax.gemm import GEMM_ORDERS, TILE_WIDTHS, gemm
from helpers import TOL, rel_err

pytestmark = pytest.mark.gpu


def _hopper() -> bool:
    return str(getattr(jax.devices()[0], "compute_capability", "0")).startswith("9")


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("tile_n", TILE_WIDTHS)
@pytest.mark.parametrize("order,band", [(o, 8) for o in GEMM_ORDERS] + [("grouped", 3)])
def test_gemm_matches_reference(dtype, tile_n, order, band):
    if not _hopper():
        pytest.skip("the Hopper GEMM needs compute capability 9.0")
    # 1100 rows: 9 tile rows (a ragged band); n and k not multiples of the tile.
    ka, kw = jax.random.split(jax.random.key(tile_n + band))
    a = jax.random.normal(ka, (1100, 712), jnp.float32)
    w = jax.random.normal(kw, (712, 1000), jnp.float32) / 712 ** 0.5
    got = jax.jit(lambda a, w: gemm(a, w, tile_n=tile_n, order=order, group_rows=band))(
        a.astype(dtype), w.astype(dtype))
    assert got.dtype == dtype and got.shape == (1100, 1000)
    assert rel_err(got, a.astype(dtype).astype(jnp.float32) @ w.astype(dtype).astype(jnp.float32)) < TOL[dtype]



@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("order,band", [(o, 8) for o in GEMM_ORDERS] + [("grouped", 3)])
@pytest.mark.parametrize("m", [1, 100, 300, 1100, 2048])
def test_gemm_cluster2_matches_reference(dtype, order, band, m):
    # 2x1 clusters with B multicast: m = 1 and 100 leave the peer of the only
    # row-tile pair without rows; 300 and 1100 have an odd number of row
    # tiles; n = 1000 ends in a column tile whose second B half is empty.
    if not _hopper():
        pytest.skip("the Hopper GEMM needs compute capability 9.0")
    ka, kw = jax.random.split(jax.random.key(m + band))
    a = jax.random.normal(ka, (m, 712), jnp.float32)
    w = jax.random.normal(kw, (712, 1000), jnp.float32) / 712 ** 0.5
    got = jax.jit(lambda a, w: gemm(a, w, tile_n=128, order=order, group_rows=band, cluster_m=2))(
        a.astype(dtype), w.astype(dtype))
    assert got.dtype == dtype and got.shape == (m, 1000)
    assert rel_err(got, a.astype(dtype).astype(jnp.float32) @ w.astype(dtype).astype(jnp.float32)) < TOL[dtype]


@pytest.mark.parametrize("tile_n,cluster_m", [(t, 1) for t in TILE_WIDTHS] + [(128, 2)])
def test_gemm_many_tiles_per_cta(tile_n, cluster_m):
    # 33 x 32-42 tiles on the GPU's ~132 CTAs: every CTA (or cluster) takes
    # several positions of the static schedule, the last of them ragged.
    if not _hopper():
        pytest.skip("the Hopper GEMM needs compute capability 9.0")
    ka, kw = jax.random.split(jax.random.key(tile_n * cluster_m))
    a = jax.random.normal(ka, (4100, 520), jnp.float32).astype(jnp.float16)
    w = (jax.random.normal(kw, (520, 4040), jnp.float32) / 520 ** 0.5).astype(jnp.float16)
    got = jax.jit(lambda a, w: gemm(a, w, tile_n=tile_n, cluster_m=cluster_m))(a, w)
    assert rel_err(got, a.astype(jnp.float32) @ w.astype(jnp.float32)) < TOL[jnp.float16]


def test_gemm_cluster2_refuses_wide_tiles():
    a = jnp.zeros((128, 64), jnp.float16)
    with pytest.raises(ValueError, match="cluster_m"):
        gemm(a, jnp.zeros((64, 256), jnp.float16), tile_n=256, cluster_m=2)
