"""Argument checks shared by the linen and nnx modules."""
from __future__ import annotations


def check_names(names) -> tuple:
    """Two distinct submodule names."""
    if (not isinstance(names, (tuple, list)) or len(names) != 2
            or not all(isinstance(n, str) and n for n in names) or names[0] == names[1]):
        raise ValueError(f"names: expected two distinct submodule names, got {names!r}")
    return tuple(names)


def conv_window(size, name: str) -> tuple:
    """A conv window as (height, width) from an int or a pair; the synced
    conv pair runs 3x3 and 1x1 windows."""
    window = (size, size) if isinstance(size, int) else tuple(size)
    if window not in ((3, 3), (1, 1)):
        raise ValueError(f"{name}: expected (3, 3) or (1, 1) (or 3 or 1), got {size!r}")
    return window
