"""The cuSync core (ffi/include/cusync), checked through the module's read-only
views against the definitions in the paper, written out independently here."""
import itertools
import random

import pytest

from cusync_jax import _cusync_cpu as core

ROW_MAJOR, COLUMN_MAJOR, STRIDED, GROUPED = 0, 1, 2, 3
TILE, ROW, STRIDED_SYNC, CONV = 0, 1, 2, 3


def test_row_and_column_major_orders():
    rows = core.stage_schedule(48, 40, 1, 16, 16, ROW_MAJOR)  # 3 x 3 tiles (ragged last column)
    assert rows == [(r, c) for r in range(3) for c in range(3)]
    cols = core.stage_schedule(48, 40, 1, 16, 16, COLUMN_MAJOR)
    assert cols == [(r, c) for c in range(3) for r in range(3)]


def test_grouped_order_runs_column_major_in_bands_of_eight_rows():
    # 19 x 3 tiles: bands of rows 0-7, 8-15 and a ragged 16-18.
    order = core.stage_schedule(19 * 16, 40, 1, 16, 16, GROUPED)
    want = [(r, c) for band in (range(0, 8), range(8, 16), range(16, 19))
            for c in range(3) for r in band]
    assert order == want
    # A band of 3 rows: 2 tile rows of 7 make bands 0-2, 3-5 and 6.
    order = core.stage_schedule(7 * 16, 40, 1, 16, 16, GROUPED, group_rows=3)
    assert order == [(r, c) for band in (range(0, 3), range(3, 6), range(6, 7))
                     for c in range(3) for r in band]


def test_strided_order_puts_slices_of_one_column_together():
    # Two slices of 40 columns, 16-wide tiles: 3 tiles per slice, 6 per row.
    order = core.stage_schedule(32, 40, 2, 16, 16, STRIDED)
    assert order[:6] == [(0, 0), (0, 3), (0, 1), (0, 4), (0, 2), (0, 5)]
    assert sorted(order) == [(r, c) for r in range(2) for c in range(6)]


def test_tile_sync_one_semaphore_per_tile():
    count, per, posts = core.policy_semaphores(TILE, 0, 48, 40, 1, 16, 16)
    assert (count, per) == (9, 1)
    assert posts == list(range(9))


def test_row_sync_one_semaphore_per_row():
    count, per, posts = core.policy_semaphores(ROW, 0, 48, 40, 2, 16, 16)
    assert (count, per) == (3, 6)
    assert posts == [r for r in range(3) for _ in range(6)]


def test_strided_sync_shares_semaphores_across_slices():
    count, per, posts = core.policy_semaphores(STRIDED_SYNC, 0, 32, 40, 2, 16, 16)
    assert (count, per) == (2 * 3, 2)
    # Row 0: tiles 0..2 (gate) and 3..5 (up) post to semaphores 0, 1, 2.
    assert posts[:6] == [0, 1, 2, 0, 1, 2]
    assert posts[6:] == [3, 4, 5, 3, 4, 5]


def tiles_read(rows, cols, slices, tm, tn, region):
    """Producer tiles (row, col) whose elements intersect the region in any slice."""
    r0, r1, c0, c1 = region
    per_slice = -(-cols // tn)
    out = set()
    for tr in range(-(-rows // tm)):
        if tr * tm >= r1 or min(rows, (tr + 1) * tm) <= r0:
            continue
        for s in range(slices):
            for t in range(per_slice):
                if t * tn < c1 and min(cols, (t + 1) * tn) > c0:
                    out.add((tr, s * per_slice + t))
    return out


@pytest.mark.parametrize("slices", [1, 2, 3])
def test_waits_cover_exactly_the_tiles_read(slices):
    rng = random.Random(slices)
    rows, cols, tm, tn = 70, 52, 16, 12
    grid_cols = slices * -(-cols // tn)
    for _ in range(200):
        r0 = rng.randrange(rows)
        r1 = rng.randrange(r0 + 1, rows + 1)
        c0 = rng.randrange(cols)
        c1 = rng.randrange(c0 + 1, cols + 1)
        need = tiles_read(rows, cols, slices, tm, tn, (r0, r1, c0, c1))
        # TileSync: one wait per tile read, count 1.
        waits = core.policy_waits(TILE, 0, rows, cols, slices, tm, tn, r0, r1, c0, c1)
        assert sorted(waits) == sorted((r * grid_cols + c, 1) for r, c in need)
        # RowSync: one wait per producer row read, for the whole row.
        waits = core.policy_waits(ROW, 0, rows, cols, slices, tm, tn, r0, r1, c0, c1)
        assert sorted(waits) == sorted({(r, grid_cols) for r, _ in need})
        # StridedSync: one wait per (row, column tile within a slice), count = slices.
        waits = core.policy_waits(STRIDED_SYNC, 0, rows, cols, slices, tm, tn, r0, r1, c0, c1)
        per_slice = grid_cols // slices
        assert sorted(waits) == sorted({(r * per_slice + c % per_slice, slices) for r, c in need})


def test_posts_reach_every_wait_count():
    # Every semaphore receives exactly the count its waiters need.
    for policy, slices in itertools.product((TILE, ROW, STRIDED_SYNC), (1, 2)):
        count, per, posts = core.policy_semaphores(policy, 0, 70, 52, slices, 16, 12)
        assert sorted(set(posts)) == list(range(count))
        assert all(posts.count(s) == per for s in range(count))


def test_under_wait_weakens_the_wait():
    assert core.policy_waits(ROW, 1, 32, 32, 1, 16, 16, 0, 16, 0, 32) == [(0, 1)]
    assert core.policy_waits(TILE, 1, 32, 32, 1, 16, 16, 0, 16, 0, 32) == []


def test_conv_dependency_includes_the_halo_within_an_image():
    # 2 images of 7x7 pixels, 16 channels, 3x3: a halo of one image row + 1 pixel.
    lo, hi, c0, c1 = core.conv_dependency(7, 7, 16, 3, 3, 2, 14, 21, 0, 16)
    assert (lo, hi) == (14 - 8, 21 + 8)
    assert (c0, c1) == (0, 16)
    # Clipped at the image boundary: rows of image 0 never need image 1.
    lo, hi, _, _ = core.conv_dependency(7, 7, 16, 3, 3, 2, 0, 7, 0, 16)
    assert (lo, hi) == (0, 15)
    lo, hi, _, _ = core.conv_dependency(7, 7, 16, 3, 3, 2, 42, 49, 0, 16)
    assert (lo, hi) == (34, 49)
    # A k-block inside one filter tap reads only its channels.
    _, _, c0, c1 = core.conv_dependency(7, 7, 16, 3, 3, 2, 0, 7, 16 * 4 + 8, 16 * 4 + 16)
    assert (c0, c1) == (8, 16)
    # 1x1: no halo.
    assert core.conv_dependency(7, 7, 16, 1, 1, 2, 10, 20, 0, 16)[:2] == (10, 20)
