"""Tile-order arguments of the benchmarks: 'row_major', 'column_major',
'grouped', or 'grouped:<rows>' for bands of that many tile rows."""
from __future__ import annotations

from typing import Sequence


def parse_tile_order(text: str, orders: Sequence[str]) -> dict:
    """'grouped:16' -> {"order": "grouped", "group_rows": 16}; a plain name ->
    {"order": name} (the op's default band). Raises ValueError otherwise."""
    name, _, band = text.partition(":")
    if name not in orders or (band and (name != "grouped" or not band.isdigit() or int(band) < 1)):
        raise ValueError(f"unknown tile order {text!r}: expected one of {tuple(orders)} or grouped:<rows>")
    return {"order": name, **({"group_rows": int(band)} if band else {})}
