"""Stress: random per-tile delays and thread counts shuffle the interleaving of
producer and consumer tiles; every run must give the bit-identical result.
A policy that waits on too few producer tiles must be caught, and one that
waits for posts that never come must fail rather than hang."""
import random

import jax.numpy as jnp
import numpy as np
import pytest

import cusync_jax as cs
from helpers import mlp_inputs

TILE = ((16, 16, 16), (16, 16, 16))
RUNS = 216


def run(x, w1, w2, b1, b2, policy, mode, activation, cpu):
    return np.asarray(cs.synced_mlp(x, w1, w2, b1=b1, b2=b2, policy=policy, mode=mode,
                                    activation=activation, tile=TILE, cpu=cpu))


@pytest.mark.timeout(600)
def test_random_delays_and_threads_give_identical_results():
    rng = random.Random(1234)
    cases = {}
    for activation in ("gelu", "swiglu"):
        ops = mlp_inputs(42, 48, 32, 64, 48, jnp.float32, swiglu=activation == "swiglu")
        expected = run(*ops, cs.TileSync(), "serial", activation, cs.CpuOptions(threads=1))
        cases[activation] = (ops, expected)
    for i in range(RUNS):
        activation = rng.choice(("gelu", "swiglu"))
        policies = [cs.TileSync(), cs.RowSync()] + ([cs.StridedSync(2)] if activation == "swiglu" else [])
        policy = rng.choice(policies)
        mode = rng.choice(("fused", "streams"))
        cpu = cs.CpuOptions(threads=rng.randint(1, 8), delay_us=rng.choice((50, 200, 500)),
                            seed=rng.randrange(1 << 30), wait_timeout_ms=20_000)
        ops, expected = cases[activation]
        got = run(*ops, policy, mode, activation, cpu)
        assert np.array_equal(got, expected), (i, activation, policy, mode, cpu)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", [cs.RowSync(under_wait=1), cs.TileSync(under_wait=1)])
def test_stress_catches_a_policy_that_waits_on_too_few_tiles(policy):
    ops = mlp_inputs(7, 48, 32, 64, 48, jnp.float32)
    expected = run(*ops, cs.TileSync(), "serial", "gelu", cs.CpuOptions(threads=1))
    rng = random.Random(99)
    mismatches = 0
    for _ in range(40):
        cpu = cs.CpuOptions(threads=rng.randint(2, 8), delay_us=500, seed=rng.randrange(1 << 30))
        got = run(*ops, policy, "streams", "gelu", cpu)
        mismatches += not np.array_equal(got, expected)
    # The correct policies never mismatch (test above); the weakened one must.
    assert mismatches > 0


@pytest.mark.timeout(120)
def test_a_wait_that_can_never_be_satisfied_fails_instead_of_hanging():
    ops = mlp_inputs(8, 32, 16, 32, 16, jnp.float32)
    cpu = cs.CpuOptions(threads=2, wait_timeout_ms=300)
    with pytest.raises(Exception, match="waits for posts that never come"):
        run(*ops, cs.RowSync(under_wait=-1), "fused", "gelu", cpu)
