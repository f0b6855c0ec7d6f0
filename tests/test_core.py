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


def test_fast_divisor_divides_exactly():
    # Divisors around powers of two, where the multiplier's rounding is tightest,
    # and dividends at the ends of the range the kernels use (0 .. 2^31 - 1).
    divisors = {1, 2, 3, 5, 6, 7, 9, 11, 12, 24, 44, 88, 96, 132, 641, 1000, 65535, 2**31 - 1}
    divisors |= {2**k + e for k in range(1, 31) for e in (-1, 0, 1)}
    rng = random.Random(7)
    for d in sorted(divisors):
        dividends = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2**31 - 1, 2**31 - d}
        dividends |= {rng.randrange(2**31) for _ in range(50)}
        for n in dividends:
            if 0 <= n < 2**31:
                assert core.fast_divide(n, d) == divmod(n, d), (n, d)
    with pytest.raises(ValueError, match="divisor"):
        core.fast_divide(5, 0)


@pytest.mark.parametrize("order", [ROW_MAJOR, COLUMN_MAJOR, STRIDED, GROUPED])
def test_precomputed_divisors_map_every_position_as_plain_division(order):
    # The GPU kernels' position -> tile map (StageDivisors) against the plain
    # one, over ragged grids, bands that do and do not divide the rows, and
    # SwiGLU-like slices.
    rng = random.Random(order)
    for _ in range(60):
        tile_rows, tile_cols = rng.choice([(16, 16), (64, 128), (128, 96), (128, 256)])
        slices = rng.choice([1, 2, 3]) if order == STRIDED else rng.choice([1, 2])
        rows = rng.randrange(1, 40) * tile_rows - rng.randrange(tile_rows)
        cols = rng.randrange(1, 12) * tile_cols - rng.randrange(tile_cols)
        group_rows = rng.choice([1, 2, 3, 8, 16, 17])
        args = (rows, cols, slices, tile_rows, tile_cols, order, group_rows)
        fast = core.stage_tile_bounds(*args, precomputed=True)
        assert fast == core.stage_tile_bounds(*args, precomputed=False), args
        assert [t[:2] for t in fast] == core.stage_schedule(*args), args


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


def test_wait_span_counts_and_bounds_the_waits_without_walking_them():
    # The Hopper loader stops waiting once a tile's memo holds every
    # semaphore the span counts, so the count must never fall short of the
    # semaphores the walk names, and the bounds must hold them all.
    rng = random.Random(11)
    for _ in range(400):
        policy = rng.choice((TILE, ROW, STRIDED_SYNC, CONV))
        slices = rng.choice((1, 2, 3))
        tile_rows, tile_cols = rng.choice((8, 16, 128)), rng.choice((8, 12, 64))
        rows = rng.randrange(1, 6 * tile_rows)
        cols = slices * tile_cols * rng.randrange(1, 6)
        stage = (rows, cols, slices, tile_rows, tile_cols)
        r0 = rng.randrange(0, rows)
        r1 = rng.randrange(r0, rows + 1)
        c0 = rng.randrange(0, cols // slices)
        c1 = rng.randrange(c0, cols // slices + 1)
        under = rng.choice((0, 0, 0, 1))
        waits = core.policy_waits(policy, under, *stage, r0, r1, c0, c1)
        count, lo, hi = core.policy_wait_span(policy, under, *stage, r0, r1, c0, c1)
        if not waits:
            assert (count, hi) == (0, -1), (policy, stage, r0, r1, c0, c1)
            continue
        sems = [s for s, _ in waits]
        assert count == len(sems) == len(set(sems)), (policy, stage, r0, r1, c0, c1)
        assert (lo, hi) == (min(sems), max(sems)), (policy, stage, r0, r1, c0, c1)


def test_a_tile_acquires_each_semaphore_once():
    assert core.semaphores_to_acquire([7, 8, 9] * 9) == [True] * 3 + [False] * 24
    # A window of 32 indices follows the latest: 0 falls out when 40 comes in.
    assert core.semaphores_to_acquire([0, 40, 41, 40, 41, 42, 40, 0]) == \
        [True, True, True, False, False, True, False, True]
    assert core.semaphores_to_acquire([10, 3, 10, 3, 11, 40, 3, 11]) == \
        [True, True, False, False, True, True, True, False]
    # An MLP tile's row of producer columns, two k-blocks each, in k order.
    cols = [c for c in range(48) for _ in range(2)]
    assert core.semaphores_to_acquire(cols) == [k % 2 == 0 for k in range(96)]


def test_skipped_acquires_were_made_earlier_in_the_tile():
    rng = random.Random(5)
    for _ in range(200):
        named = [rng.randrange(0, rng.choice((4, 40, 400))) for _ in range(rng.randrange(1, 60))]
        acquire = core.semaphores_to_acquire(named)
        for i, (sem, a) in enumerate(zip(named, acquire)):
            assert a or any(s == sem and b for s, b in zip(named[:i], acquire[:i])), (named, i)


def test_a_conv_tile_acquires_its_halo_once():
    # ResNet's 56x56x64 pair at batch 1, 128x64 tiles: every k-block of a
    # consumer tile names the same three producer tiles (its rows' halo);
    # the tile acquires them at its first k-block only.
    pixels, channels, tile_m, tile_k = 56 * 56, 64, 128, 64
    k_total = 9 * channels
    for tile in (0, 3, 24):
        r0, r1 = tile * tile_m, min(pixels, (tile + 1) * tile_m)
        named = []
        for k0 in range(0, k_total, tile_k):
            region = core.conv_dependency(56, 56, channels, 3, 3, 1, r0, r1, k0, k0 + tile_k)
            named += [sem for sem, _ in core.policy_waits(CONV, 0, pixels, channels, 1, tile_m, 64, *region)]
        distinct = sorted(set(named))
        assert len(distinct) == (2 if tile in (0, 24) else 3)
        acquire = core.semaphores_to_acquire(named)
        assert [s for s, a in zip(named, acquire) if a] == distinct


@pytest.mark.parametrize("rows,cols,k_blocks,ctas", [
    (2, 48, 192, 132),   # GPT-3's first GEMM at 256 tokens
    (2, 96, 96, 132),    # its second
    (6, 48, 192, 132),   # 768 tokens
    (3, 5, 6, 132),      # more ranges than a row has k-blocks: one k-block each
    (1, 8, 5, 40),
    (5, 7, 13, 132),     # 132 ranges do not divide among 5 rows: 26 each
    (200, 2, 4, 132),    # more rows than CTAs: one range per row
    (2, 32, 192, 132),   # 128x192 tiles there: 66 CTAs a row, each tile split in two (64)
    (3, 7, 13, 132),     # 44 CTAs a row: 6 ranges a tile (42)
])
def test_stream_k_schedule_covers_every_k_block_once_rows_in_step(rows, cols, k_blocks, ctas):
    max_segments, per_cta = core.stream_k_schedule(rows, cols, k_blocks, ctas)
    per_row = ctas // rows
    if per_row >= cols:
        per_row = cols * (per_row // cols)  # an even split of every tile
    per_row = max(1, min(per_row, cols * k_blocks))
    assert len(per_cta) == rows * per_row
    done = {}
    by_tile = {}
    for c, segments in enumerate(per_cta):
        units = 0
        for row, col, kb0, kb1, slot, count in segments:
            assert row == c % rows and 0 <= col < cols and 0 <= kb0 < kb1 <= k_blocks
            for kb in range(kb0, kb1):
                assert (row, col, kb) not in done, "a k-block of a tile runs twice"
                done[row, col, kb] = c
            by_tile.setdefault((row, col), []).append((kb0, slot, count, c))
            units += kb1 - kb0
        # Ranges of a row differ in length by one k-block at most.
        line = cols * k_blocks
        assert units in (line // per_row, line // per_row + 1)
    assert len(done) == rows * cols * k_blocks
    for (row, col), segs in by_tile.items():
        segs.sort()
        # Slots number a tile's segments 0.. in k order; every segment knows the count.
        assert [s[1] for s in segs] == list(range(len(segs)))
        assert all(s[2] == len(segs) for s in segs)
        assert len(segs) <= max_segments
        # Segments of one tile come from consecutive CTAs of its row.
        assert [s[3] for s in segs] == [segs[0][3] + rows * i for i in range(len(segs))]
    # Rows in step: range j of every row runs the same columns and k-blocks.
    for j in range(per_row):
        shapes = {tuple((col, kb0, kb1) for _, col, kb0, kb1, _, _ in per_cta[j * rows + r]) for r in range(rows)}
        assert len(shapes) == 1


def _stream_k_reference(rows, cols, k_blocks, ctas):
    """cusync/stream_k.h's schedule, written again in plain integer arithmetic."""
    per_row = core.stream_k_ctas_per_row(rows, cols, k_blocks, ctas)
    q, r = divmod(cols * k_blocks, per_row)

    def begin(j):
        return j * q + min(j, r)

    def range_of(u):
        big = r * (q + 1)
        return u // (q + 1) if u < big else r + (u - big) // q

    per_cta = []
    for c in range(rows * per_row):
        row, j = c % rows, c // rows
        u, end, segments = begin(j), begin(j + 1), []
        while u < end:
            col, kb0 = divmod(u, k_blocks)
            kb1 = min(kb0 + end - u, k_blocks)
            first = range_of(col * k_blocks)
            segments.append((row, col, kb0, kb1, range_of(u) - first,
                             range_of(col * k_blocks + k_blocks - 1) - first + 1))
            u += kb1 - kb0
        per_cta.append(segments)
    return (k_blocks + q - 1) // q + 1 if q else k_blocks, per_cta


def test_stream_k_schedule_matches_plain_division():
    # Shapes of both models at 256-4096 tokens (128- and 192-wide tiles, K of
    # 2816-12288), small and ragged ones, and a random sweep.
    shapes = [(rows, cols, kb, 132) for rows in (2, 4, 6, 8, 12, 16, 24, 32)
              for cols in (22, 32, 44, 48, 64, 96) for kb in (44, 96, 128, 192)]
    rng = random.Random(7)
    shapes += [(rng.randint(1, 40), rng.randint(1, 120), rng.randint(1, 300), rng.randint(1, 264))
               for _ in range(400)]
    for shape in shapes:
        want = _stream_k_reference(*shape)
        got = core.stream_k_schedule(*shape)
        assert got[0] == want[0], shape
        assert [list(map(tuple, segs)) for segs in got[1]] == want[1], shape


@pytest.mark.parametrize("rows,cols,k_blocks,ctas", [(2, 32, 192, 132), (3, 5, 40, 132), (6, 48, 192, 132)])
def test_stream_k_lines_padded_for_clusters_pair_adjacent_rows(rows, cols, k_blocks, ctas):
    # 2x1 clusters: CTAs 2i and 2i + 1 run the same range of lines 2r and
    # 2r + 1; an odd row count gets a padded line whose tiles lie past the last row.
    _, per_cta = core.stream_k_schedule(rows, cols, k_blocks, ctas, cluster_rows=2)
    lines = rows + rows % 2
    assert len(per_cta) % 2 == 0 and len(per_cta) <= ctas
    for c in range(0, len(per_cta), 2):
        a, b = per_cta[c], per_cta[c + 1]
        assert a and [s[0] for s in a] == [c % lines] * len(a) and [s[0] for s in b] == [c % lines + 1] * len(b)
        assert [s[1:] for s in a] == [s[1:] for s in b]
    real = {(s[0], s[1], kb) for segs in per_cta for s in segs for kb in range(s[2], s[3]) if s[0] < rows}
    assert len(real) == rows * cols * k_blocks
