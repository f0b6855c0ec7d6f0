"""The fused mode's placed schedule (cusync/placed_schedule.h), which the
Hopper fused kernel and the CPU executor share: every unit runs its own static
positions when all run together, and a launch completes when only some of its
units run at a time (a grid larger than what is resident)."""
import random

import jax.numpy as jnp
import numpy as np
import pytest

import cusync_jax as cs
from cusync_jax import _backend, _cusync_cpu
from helpers import conv_inputs, mlp_inputs

claims = _cusync_cpu.placed_schedule_claims


def static_positions(tiles0, positions, units, unit):
    return list(range(unit, tiles0, units)) + list(range(tiles0 + unit, positions, units))


def assert_a_valid_schedule(taken, tiles0, positions):
    flat = sorted(p for unit in taken for p in unit)
    assert flat == list(range(positions)), "every position taken exactly once"
    for unit in taken:
        stages = [p >= tiles0 for p in unit]
        assert stages == sorted(stages), f"a producer tile after a consumer tile: {unit}"


@pytest.mark.parametrize("tiles0,positions,units", [(384, 1152, 128), (8, 20, 4), (0, 4, 2), (6, 6, 3)])
def test_units_in_lockstep_take_the_static_placement(tiles0, positions, units):
    turns = list(range(units)) * (positions + 2)
    taken = claims(tiles0, positions, units, turns)
    assert taken == [static_positions(tiles0, positions, units, u) for u in range(units)]


def test_units_in_lockstep_run_their_own_full_waves_and_share_the_tail():
    # GPT-3 at 1024 tokens on 132 SMs: 384 producer and 768 consumer tiles,
    # 2 and 5 full waves a unit. Units with one tile fewer in a stage steal
    # the stage's last positions instead of idling.
    tiles0, positions, units = 384, 1152, 132
    taken = claims(tiles0, positions, units, list(range(units)) * (positions + 2))
    assert_a_valid_schedule(taken, tiles0, positions)
    for u, mine in enumerate(taken):
        own = static_positions(tiles0, positions, units, u)
        producers = [p for p in mine if p < tiles0]
        consumers = [p for p in mine if p >= tiles0]
        assert producers[:2] == own[:2] and consumers[:5] == [p for p in own if p >= tiles0][:5], u


def test_units_that_run_late_find_their_positions_stolen():
    # Units 2 and 3 start only once 0 and 1 have finished (CTAs beyond the
    # SMs): 0 and 1 take every producer tile before any consumer tile, so a
    # consumer never waits on a tile no running unit holds.
    tiles0, positions, units = 10, 25, 4
    taken = claims(tiles0, positions, units, [0, 1] * 40 + [2, 3] * 40)
    assert_a_valid_schedule(taken, tiles0, positions)
    assert taken[2] == taken[3] == []
    assert sorted(taken[0] + taken[1]) == list(range(positions))
    first_consumer = min(i for u in (0, 1) for i, p in enumerate(taken[u]) if p >= tiles0)
    assert first_consumer >= 1
    # Unit 0 runs its own producer positions first (0, 4, 8), then steals from the end.
    assert taken[0][:3] == [0, 4, 8]


def test_random_interleavings_take_every_position_once():
    rng = random.Random(5)
    for _ in range(300):
        units = rng.randint(1, 9)
        tiles0 = rng.randint(0, 30)
        positions = tiles0 + rng.randint(0, 30)
        turns = [rng.randrange(units) for _ in range(20 * (positions + units))] + list(range(units)) * (positions + 2)
        assert_a_valid_schedule(claims(tiles0, positions, units, turns), tiles0, positions)


def test_a_bad_schedule_is_refused_naming_it():
    with pytest.raises(ValueError, match="placed_schedule_claims"):
        claims(5, 3, 2, [0])
    with pytest.raises(ValueError, match="no unit"):
        claims(5, 8, 2, [2])


def test_fused_plans_hold_a_flag_per_tile_of_both_gemms():
    # 300 tokens, ffn 512, out 128 in 128x128 tiles: 3 x 4 producer tiles,
    # 3 x 1 consumer tiles.
    plans = {m: cs.plan_mlp(300, 256, 512, 128, device="h200", mode=m, tile=(128, 128, 64)).plan
             for m in ("fused", "serial")}
    base = _backend.SYNC_HEADER_WORDS + 3 * 4
    assert _backend.mlp_sync_words(300, 256, 512, 128, 1, plans["serial"]) == base
    assert _backend.mlp_sync_words(300, 256, 512, 128, 1, plans["fused"]) == base + 3 * 4 + 3 * 1


TILE = ((16, 16, 16), (16, 16, 16))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", [cs.TileSync(), cs.RowSync(), cs.StridedSync(2)], ids=["TileSync", "RowSync",
                                                                                         "StridedSync"])
def test_fused_mlp_completes_with_few_threads_resident(policy):
    # 3 x 4 producer tiles, 3 x 3 consumer tiles; 8 units, 1 or 2 running at
    # a time. A schedule that left a producer tile to a unit not yet running
    # would time out.
    ops = mlp_inputs(31, 48, 32, 64, 48, jnp.float32, swiglu=True)
    expected = np.asarray(cs.synced_mlp(*ops[:3], b1=ops[3], b2=ops[4], activation="swiglu", mode="serial",
                                        tile=TILE, cpu=cs.CpuOptions(threads=1)))
    rng = random.Random(8)
    for resident in (1, 2, 2):
        cpu = cs.CpuOptions(threads=8, resident=resident, delay_us=200, seed=rng.randrange(1 << 30),
                            wait_timeout_ms=20_000)
        got = cs.synced_mlp(*ops[:3], b1=ops[3], b2=ops[4], activation="swiglu", policy=policy, mode="fused",
                            tile=TILE, cpu=cpu)
        assert np.array_equal(np.asarray(got), expected), (policy, cpu)


@pytest.mark.timeout(300)
def test_fused_conv_pair_completes_with_few_threads_resident():
    ops = conv_inputs(24, 2, 7, 7, 8, 32, 16, jnp.float32, residual=True)

    def run(policy, mode, cpu):
        x, k1, k2, b1, b2, res = ops
        return np.asarray(cs.synced_conv_pair(x, k1, k2, b1=b1, b2=b2, residual=res, policy=policy, mode=mode,
                                              tile=TILE, cpu=cpu))

    expected = run(cs.TileSync(), "serial", cs.CpuOptions(threads=1))
    for policy in (cs.Conv2DTileSync(3, 3), cs.RowSync()):
        cpu = cs.CpuOptions(threads=6, resident=2, delay_us=200, seed=3, wait_timeout_ms=20_000)
        assert np.array_equal(run(policy, "fused", cpu), expected), policy


def test_cpu_options_refuse_a_negative_resident_count():
    with pytest.raises(ValueError, match="CpuOptions.resident"):
        cs.CpuOptions(resident=-1)
