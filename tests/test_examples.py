"""The README's examples run on the CPU and agree with plain JAX."""
import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def run_example(name, *args):
    # As the README runs them: the script's folder (examples/) leads sys.path, so
    # the installed package is imported, not the source folder.
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                         text=True, timeout=300, cwd=EXAMPLES)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_mlp_example():
    out = run_example("mlp_example.py")
    err = float(re.search(r"max error relative to max \|y\|: (\S+)", out).group(1))
    assert err < 1e-4


@pytest.mark.parametrize("name", ["gpt3_layer.py", "resnet38.py"])
def test_model_examples(name):
    pytest.importorskip("flax")
    out = run_example(name, "--reps", "1")
    rows = [line.split() for line in out.splitlines() if re.match(r"^\s*\d+\s+[\d.]+\s+[\d.]+", line)]
    assert rows, out
    for row in rows:
        assert float(row[-1]) < 1e-4, row  # max relative error against the plain model
