"""What ``policy="auto"`` learned from measurement: per device, per MLP (and
conv pair) shape and dtype, the fastest way to run it, including XLA's own ops.

The tables ship in ``cusync_jax/tuned/<device>-mlp.json``,
``<device>-conv.json`` (conv pairs) and ``<device>-conv-residual.json`` (conv
pairs with a residual add, ResNet's blocks: the add is another epilogue and
moves the winner); ``bench/tune.py`` writes them from a ``bench/mlp.py`` or
``bench/conv.py`` run on that device (every variant and XLA timed in the same
rounds). An entry names the winner: a policy, mode and tile of this library's
kernels, or ``"xla"`` where no synced variant was faster than XLA, in which
case the op falls back to XLA's own ops.

Tables measured on your own GPU (``bench/tune.py --out-dir DIR``) take
precedence when ``CUSYNC_JAX_TUNED_DIR=DIR`` is set: a table found there
replaces the shipped one of its device and op; devices it has no table for
keep the shipped ones.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import pathlib
from typing import Optional

from .kernels import TileShape
from .policies import Policy, RowSync, StridedSync, TileSync

TABLE_DIR = pathlib.Path(__file__).resolve().parent / "tuned"
# A directory of tables measured by the user, searched before TABLE_DIR.
TUNED_DIR_ENV = "CUSYNC_JAX_TUNED_DIR"
# A measured token count (or conv batch) stands for counts within this factor of it.
TOKEN_REACH = 1.5


@dataclasses.dataclass(frozen=True)
class TunedChoice:
    """The measured winner of one case."""

    impl: str                 # "xla", "serial" or "<policy>-<mode>"
    tokens: int               # the measured token count it came from
    policy: Optional[Policy]  # None for "xla"
    mode: str                 # "xla", "serial", "fused" or "streams"
    tile: Optional[object]    # a TileShape, or a (producer, consumer) pair of them
    speedup_over_xla: Optional[float]  # measured; < 1 never wins (it falls back); None: no row to judge
    order: Optional[str] = None  # tile order of both GEMMs; None: the planner's
    group_rows: int = 8          # the grouped order's band height
    cluster_m: int = 1           # Hopper kernel: CTAs per cluster along the rows
    stream_k: tuple = (False, False)  # serial mode: (producer, consumer) GEMMs stream-K
    mma_schedule: str = "auto"   # Hopper kernel, whole 128x128 and 96x128 tiles (planner.MMA_SCHEDULES)

    @property
    def fallback(self) -> bool:
        return self.impl == "xla"


def device_slug(name: str) -> str:
    """'NVIDIA H200' / 'H200' / 'h200' -> 'h200' (the tables' file prefix)."""
    words = str(name).lower().replace("nvidia", " ").split()
    return words[0] if words else "unknown"


def policy_from_name(name: str) -> Policy:
    if name == "TileSync":
        return TileSync()
    if name == "RowSync":
        return RowSync()
    if name.startswith("StridedSync(") and name.endswith(")"):
        return StridedSync(int(name[len("StridedSync("):-1]))
    raise ValueError(f"tuned table: unknown policy {name!r}")


def table_path(slug: str, op: str = "mlp") -> pathlib.Path:
    """The table policy="auto" reads for a device slug and op ("mlp", "conv",
    "conv-residual"): $CUSYNC_JAX_TUNED_DIR's where it has one, else the
    shipped one (which may not exist: no table, the wave model decides)."""
    own = os.environ.get(TUNED_DIR_ENV)
    if own:
        directory = pathlib.Path(own)
        if not directory.is_dir():
            raise ValueError(f"{TUNED_DIR_ENV}={own!r}: not a directory; expected one holding tables "
                             "such as h200-mlp.json, as bench/tune.py --out-dir writes them")
        path = directory / f"{slug}-{op}.json"
        if path.exists():
            return path
    return TABLE_DIR / f"{slug}-{op}.json"


def table_source(device_name: str, op: str = "mlp") -> Optional[dict]:
    """Which table a device's op reads and its content's hash (what a
    benchmark records beside its auto rows); None where there is none."""
    path = table_path(device_slug(device_name), op)
    if not path.exists():
        return None
    return {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16],
            "shipped": path.parent.resolve() == TABLE_DIR.resolve()}


def _table(slug: str, op: str = "mlp") -> tuple:
    return _read_table(table_path(slug, op))


@functools.lru_cache(maxsize=None)
def _read_table(path: pathlib.Path) -> tuple:
    if not path.exists():
        return ()
    return tuple(json.loads(path.read_text())["entries"])


def _choice(entry: dict) -> TunedChoice:
    tile = entry.get("tile")
    if tile:
        # [m, n, k] for both GEMMs, or [[m, n, k], [m, n, k]] for one each.
        tile = (tuple(TileShape(*t) for t in tile) if isinstance(tile[0], list) else TileShape(*tile))
    else:
        tile = None
    policy = policy_from_name(entry["policy"]) if entry.get("policy") else None
    return TunedChoice(entry["impl"], entry["tokens"], policy, entry["mode"], tile,
                       entry["speedup_over_xla"], entry.get("order"), entry.get("group_rows", 8),
                       entry.get("cluster_m", 1), tuple(entry.get("stream_k", (False, False))),
                       entry.get("mma_schedule", "auto"))


def lookup(device_name: str, tokens: int, hidden: int, ffn: int, out: int, activation: str,
           dtype: Optional[str] = None) -> Optional[TunedChoice]:
    """The measured choice for this shape at the nearest measured token count
    (within TOKEN_REACH), or None. dtype None matches any dtype."""
    e = _nearest((e for e in _table(device_slug(device_name))
                  if (e["hidden"], e["ffn"], e["out"], e["activation"]) == (hidden, ffn, out, activation)
                  and dtype in (None, e["dtype"])), tokens, "tokens")
    return _choice(e) if e else None


def _nearest(entries, count: int, key: str) -> Optional[dict]:
    """The entry whose `key` (tokens, or a conv's batch) is nearest `count`
    within TOKEN_REACH, or None."""
    best = None
    for e in entries:
        distance = abs(math.log(max(count, 1) / e[key]))
        if distance <= math.log(TOKEN_REACH) and (best is None or distance < best[0]):
            best = (distance, e)
    return best[1] if best else None


@dataclasses.dataclass(frozen=True)
class ConvTunedChoice:
    """The measured winner of one conv-pair case: plan_conv_pair's arguments
    (policy a name, tile a (producer, consumer) pair of TileShapes or None
    for the planner's), or impl "xla"."""

    impl: str
    batch: int                # the measured batch it came from
    policy: Optional[str]
    mode: str
    tile: Optional[tuple]
    split_k: tuple
    speedup_over_xla: Optional[float]  # None: the case was timed, but not so as to judge it (XLA's)

    @property
    def fallback(self) -> bool:
        return self.impl == "xla"


def lookup_conv(device_name: str, images: int, height: int, width: int, channels: tuple, filters: tuple,
                activation: str, dtype: Optional[str] = None,
                residual: bool = False) -> Optional[ConvTunedChoice]:
    """The measured choice for this conv pair (channels (C0, C1, C2), filters
    ((R1, S1), (R2, S2))) at the nearest measured batch (within TOKEN_REACH),
    or None. dtype None matches any dtype. residual: the pair adds a residual
    (the table of ResNet blocks, measured with it)."""
    shape = (height, width, tuple(channels), tuple(map(tuple, filters)), activation)
    e = _nearest((e for e in _table(device_slug(device_name), "conv-residual" if residual else "conv")
                  if (e["height"], e["width"], tuple(e["channels"]), tuple(map(tuple, e["filters"])),
                      e["activation"]) == shape and dtype in (None, e["dtype"])), images, "batch")
    if e is None:
        return None
    tile = tuple(TileShape(*t) for t in e["tile"]) if e.get("tile") else None
    return ConvTunedChoice(e["impl"], e["batch"], e.get("policy"), e["mode"], tile, tuple(e["split_k"]),
                           e["speedup_over_xla"])
