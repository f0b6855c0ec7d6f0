"""Synchronization policies and optimizations, as small frozen dataclasses.

A policy says which semaphore a producer tile posts to and what a consumer
tile waits on; the semantics live once, in ``ffi/include/cusync/policy.h``,
and these classes only name them (and carry their parameters) on the Python
side.
"""
from __future__ import annotations

import dataclasses
from typing import Union


@dataclasses.dataclass(frozen=True)
class TileSync:
    """One semaphore per producer tile; a consumer waits, per k-block, for the
    producer tiles it reads. Most overlap, most waits: best at small batch."""

    code = 0
    under_wait: int = dataclasses.field(default=0, repr=False, compare=True)


@dataclasses.dataclass(frozen=True)
class RowSync:
    """One semaphore per producer row of tiles; a consumer waits once for the
    whole row. Fewest waits, less overlap: best at large batch."""

    code = 1
    under_wait: int = dataclasses.field(default=0, repr=False, compare=True)


@dataclasses.dataclass(frozen=True)
class StridedSync:
    """Producer column tiles ``j, j + C, ...`` (one per slice of its output)
    share a semaphore that counts to ``slices``: a consumer that needs the same
    column tile of every slice (SwiGLU's gate and up halves: ``slices=2``)
    waits once for all of them. ``slices`` must equal the activation's slices."""

    slices: int = 2
    code = 2
    under_wait: int = dataclasses.field(default=0, repr=False, compare=True)

    def __post_init__(self):
        if not isinstance(self.slices, int) or self.slices < 1:
            raise ValueError(f"StridedSync: slices must be a positive int, got {self.slices!r}")


@dataclasses.dataclass(frozen=True)
class Conv2DTileSync:
    """TileSync for an implicit-GEMM convolution with an R x S filter: a
    consumer k-block (filter tap, channel block) waits on the producer tiles of
    those channels over the pixels of its halo."""

    r: int = 3
    s: int = 3
    code = 3
    under_wait: int = dataclasses.field(default=0, repr=False, compare=True)


Policy = Union[TileSync, RowSync, StridedSync, Conv2DTileSync]
POLICY_TYPES = (TileSync, RowSync, StridedSync, Conv2DTileSync)
_BY_NAME = {
    "tilesync": TileSync,
    "tile": TileSync,
    "rowsync": RowSync,
    "row": RowSync,
    "stridedsync": StridedSync,
    "strided": StridedSync,
    "conv2dtilesync": Conv2DTileSync,
}


def parse_policy(policy) -> "Policy | None":
    """A policy object from an instance, a class or a name; None for "auto"."""
    if policy is None or (isinstance(policy, str) and policy.lower() == "auto"):
        return None
    if isinstance(policy, POLICY_TYPES):
        return policy
    if isinstance(policy, type) and policy in POLICY_TYPES:
        return policy()
    if isinstance(policy, str) and policy.lower() in _BY_NAME:
        return _BY_NAME[policy.lower()]()
    raise ValueError(
        f"policy: expected 'auto', a name in {sorted(set(_BY_NAME))} or one of "
        f"TileSync(), RowSync(), StridedSync(slices), Conv2DTileSync(r, s); got {policy!r}")


def policy_name(policy: Policy) -> str:
    if isinstance(policy, StridedSync):
        return f"StridedSync({policy.slices})"
    return type(policy).__name__


@dataclasses.dataclass(frozen=True)
class Optimizations:
    """The paper's optimizations, each selectable.

    avoid_wait_kernel:    skip the wait kernel when both grids fit in one wave (W).
    reorder_tile_loads:   load the consumer's B tile before waiting on A (R).
    release_store_posts:  post with a release store where a semaphore has one poster.
    hardware_block_order: take tiles in blockIdx order instead of the stage's order.
    overlap_launches:     serial mode on Hopper: the consumer GEMM is launched as a
                          programmatic dependent of the producer, so its CTAs start,
                          and load their first B k-blocks, as the producer's CTAs exit;
                          A is read only once the producer has completed. Off by
                          default: on the H200 it gains 0-3 % on the LLaMA MLPs and
                          loses up to 5 % on GPT-3's at 256 tokens (bench/NOTES_sm90.md).
    """

    avoid_wait_kernel: bool = True
    reorder_tile_loads: bool = True
    release_store_posts: bool = True
    hardware_block_order: bool = False
    overlap_launches: bool = False

    def bits(self) -> int:
        return (int(self.avoid_wait_kernel) | int(self.reorder_tile_loads) << 1
                | int(self.release_store_posts) << 2 | int(self.hardware_block_order) << 3
                | int(self.overlap_launches) << 4)


MODES = ("fused", "streams", "serial")
MODE_CODES = {"serial": 0, "streams": 1, "fused": 2}
ORDER_CODES = {"row_major": 0, "column_major": 1, "strided": 2, "grouped": 3}
