"""Tensor parallelism (cusync_jax.parallel) on 8 virtual CPU devices.

The device count is fixed when jax starts, so the cases run in one child
process (tests/tp_cases.py) with XLA_FLAGS set; each test here reports one
case's outcome."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tp_cases

_SCRIPT = Path(__file__).with_name("tp_cases.py")


@pytest.fixture(scope="module")
def outcomes():
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=(os.environ.get("XLA_FLAGS", "")
                          + " --xla_force_host_platform_device_count=8").strip())
    run = subprocess.run([sys.executable, str(_SCRIPT)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"tp_cases.py failed:\n{run.stdout}\n{run.stderr}"
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(tp_cases.CASES))
def test_tensor_parallel_case(outcomes, name):
    assert outcomes.get(name) == "ok", f"{name}:\n{outcomes.get(name)}"
