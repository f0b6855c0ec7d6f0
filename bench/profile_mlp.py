"""Profile one MLP case under Nsight Compute: XLA's program and the named
variants of bench/mlp.py, each launched once inside a profiler range
(compilation and XLA's autotuning happen before it).

    ncu --profile-from-start off --metrics gpu__time_duration.sum python bench/profile_mlp.py \
        gpt3 768 serial RowSync-fused

Each variant's kernels come out in the order listed, after XLA's. Needs cupy
(cudaProfilerStart/Stop) and a GPU.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import cupy
import jax

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cusync_jax as cs  # noqa: E402
from mlp import DTYPES, MODELS, make_inputs, order_kwargs, step_for, variants  # noqa: E402


def kwargs_of(name: str, activation: str):
    """'serial', 'RowSync-fused', ... as in bench/mlp.py, or 'RowSync-fused@grouped:4'."""
    base, _, spec = name.partition("@")
    table = variants(activation)
    if base not in table or base == "auto":
        raise SystemExit(f"variant {name!r}: expected one of {sorted(k for k in table if k != 'auto')}, "
                         "optionally with @<bench/mlp.py variant spec>")
    kw = dict(table[base] or {}) if table[base] is not None else None
    if spec:
        if kw is None:
            raise SystemExit(f"variant {name!r}: the xla row takes no spec")
        kw.update(order_kwargs(spec))
    return kw


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=list(MODELS))
    ap.add_argument("tokens", type=int)
    ap.add_argument("variants", nargs="+", help="bench/mlp.py row names (xla runs first anyway)")
    ap.add_argument("--dtype", default="float16", choices=list(DTYPES))
    args = ap.parse_args(argv)
    hidden, ffn, activation = MODELS[args.model]
    ops = make_inputs(args.tokens, hidden, ffn, activation, DTYPES[args.dtype], seed=0)
    names = ["xla"] + [v for v in args.variants if v != "xla"]
    device = jax.devices()[0]
    planner_device = cs.planner.device_model(device) if device.platform == "gpu" else "h200"
    fns = []
    for name in names:
        kw = kwargs_of(name, activation)
        plan = None
        if kw is not None:
            plan = cs.plan_mlp(args.tokens, hidden, ffn, activation=activation, device=planner_device,
                               dtype=args.dtype, **kw).plan
        print(f"{name}: {plan}", flush=True)
        fns.append(jax.jit(step_for(kw, activation, plan)))
    for f in fns:  # compile, autotune, warm up
        f(*ops).block_until_ready()
    cupy.cuda.profiler.start()
    for f in fns:
        f(*ops).block_until_ready()
    cupy.cuda.profiler.stop()


if __name__ == "__main__":
    main()
