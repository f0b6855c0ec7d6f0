"""The benchmarks' check of what they time: before a case is timed, each
row's output is computed once and compared with the reference row's (XLA's
ops), so a wrong kernel cannot be recorded as a fast one. The error lands in
the row (`rel_err`), a row past the tolerance is printed as WRONG, and
bench/tune.py never picks such a row.
"""
from __future__ import annotations

from typing import Callable, Dict, Sequence

import jax
import jax.numpy as jnp

# max |row - reference| / max |reference|. Looser than the tests' tolerances
# (the reference is XLA's own half-precision result, not a float32 one), far
# below the order-1 errors of a wrong tile, sum or synchronization.
CHECK_TOL = {"float16": 3e-2, "bfloat16": 1e-1, "float32": 1e-3}


@jax.jit
def _rel_err(got, want):
    """max |got - want| / max |want| in float32, on the device (a large output
    never crosses to the host); inf where got is not finite."""
    got, want = got.astype(jnp.float32), want.astype(jnp.float32)
    e = jnp.max(jnp.abs(got - want), initial=0.0) / jnp.maximum(jnp.max(jnp.abs(want), initial=0.0), 1e-30)
    return jnp.where(jnp.all(jnp.isfinite(got)), e, jnp.inf)


def check(fns: Dict[str, Callable], args: Sequence, reference: str = "xla") -> Dict[str, float]:
    """name -> rel_err of fns[name](*args) against fns[reference](*args),
    each jitted and run once."""
    want = jax.jit(fns[reference])(*args)
    out = {}
    for name, fn in fns.items():
        got = want if name == reference else jax.jit(fn)(*args)
        out[name] = float("inf") if got.shape != want.shape else float(_rel_err(got, want))
    return out


def add_check_option(ap, first: str) -> None:
    """--check first|all|none for a benchmark's argument parser; `first` names
    the first size of a case family ("layer's first batch")."""
    ap.add_argument("--check", choices=("first", "all", "none"), default="first",
                    help=f"compare each row's output with XLA's before timing it (bench/checks.py): at each "
                         f"{first} (default), at every size, or not at all")


def wanted(option: str, index: int) -> bool:
    """Whether --check `option` checks the case at `index` of its family's sizes."""
    return option == "all" or (option == "first" and index == 0)


def is_wrong(row: dict) -> bool:
    """Whether a result row carries a check past its dtype's tolerance."""
    err = row.get("rel_err")
    return err is not None and not err <= CHECK_TOL.get(row.get("dtype", "float32"), CHECK_TOL["float32"])


def report(errs: Dict[str, float], dtype_name: str, what: str) -> None:
    """Prints a WRONG line for each row past the tolerance."""
    tol = CHECK_TOL[dtype_name]
    for name, err in errs.items():
        if not err <= tol:
            print(f"WRONG: {what} {name}: rel err {err:.3g} against xla (tolerance {tol:g}); "
                  f"recorded with rel_err, never chosen by bench/tune.py", flush=True)
