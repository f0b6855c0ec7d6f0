"""The planner: the paper's wave model, and the static plan an op runs with.

A tiled kernel runs its tiles in waves of ``slots = SMs x CTAs per SM``. Two
dependent kernels in stream order each pay their own partial last wave:

    waves_stream = ceil(T1 / slots) + ceil(T2 / slots)

while with fine-grained synchronization the consumer's tiles fill the
producer's last wave:

    waves_synced = ceil((T1 + T2) / slots)

(GPT-3 MLP at 1024 tokens on an 80-SM V100 with 256x128 tiles, 2 per SM:
192 + 384 tiles, 2 + 3 = 5 waves vs 4.) Producer and consumer tiles do not
take equally long (their k extents differ), so the planner also simulates the
tile schedule with per-tile durations (``makespan``), which is what it
compares when it picks a tile shape.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import os
from typing import Optional, Sequence

from . import kernels, tuning
from ._cusync_cpu import stage_schedule, stream_k_ctas_per_row
from .activations import activation_slices, check_activation
from .kernels import TileShape
from .policies import (MODE_CODES, ORDER_CODES, MODES, Conv2DTileSync, Optimizations, Policy, RowSync,
                       StridedSync, TileSync, parse_policy)


@dataclasses.dataclass(frozen=True)
class DeviceModel:
    """What the wave model needs to know of a device."""

    name: str
    sms: int
    # (tile m, tile n) -> CTAs per SM; tiles not listed get `default_ctas`.
    # A GPU kernel's own count (kernels.KernelConfig) takes precedence.
    ctas: tuple = ()
    default_ctas: int = 1
    arch: int = 0  # compute capability x 10 (90 for Hopper); 0 if unknown

    def ctas_per_sm(self, tile: TileShape) -> int:
        return dict(self.ctas).get((tile.m, tile.n), self.default_ctas)


V100 = DeviceModel("V100", 80, ctas=(((256, 128), 2),), default_ctas=2, arch=70)
A100 = DeviceModel("A100", 108, default_ctas=1, arch=80)
H200 = DeviceModel("H200", 132, default_ctas=1, arch=90)
DEVICES = {"v100": V100, "a100": A100, "h100": DeviceModel("H100", 132, arch=90), "h200": H200}


def resolve_device(device, cpu: "CpuOptions") -> tuple:
    """(wave model, runs on the CPU executor) for a planner's `device` argument:
    "cpu", a name in DEVICES, or a DeviceModel."""
    if isinstance(device, str) and device.lower() == "cpu":
        # The CPU executor's slots are its worker threads.
        return DeviceModel("cpu", (cpu.threads if cpu.threads > 0 else os.cpu_count()) or 1), True
    model = device if isinstance(device, DeviceModel) else DEVICES.get(str(device).lower())
    if model is None:
        raise ValueError(f"device: expected 'cpu', one of {sorted(DEVICES)} or a DeviceModel, "
                         f"got {device!r}")
    return model, False


def device_model(device) -> DeviceModel:
    """The wave model of a JAX GPU device, read off the device itself."""
    kind = getattr(device, "device_kind", "gpu")
    sms = getattr(device, "core_count", None)
    try:
        arch = int(round(float(getattr(device, "compute_capability", "0")) * 10))
    except (TypeError, ValueError):
        arch = 0
    if not sms:
        known = DEVICES.get(str(kind).lower().replace("nvidia", "").strip().split(" ")[0])
        sms = known.sms if known else 132
    return DeviceModel(str(kind), int(sms), arch=arch)


@dataclasses.dataclass(frozen=True)
class CpuOptions:
    """Controls of the CPU tile executor (ignored by the GPU backend).

    threads: worker threads, 0 for one per core. delay_us and seed: a random
    sleep in [0, delay_us) before each tile (testing: it shuffles the
    interleaving). wait_timeout_ms: a consumer wait longer than this fails the
    call instead of hanging. resident: in fused mode, at most this many
    threads run at once, the rest starting as others finish (0: all; testing:
    a grid larger than what is resident on the GPU).
    """

    threads: int = 0
    delay_us: int = 0
    seed: int = 0
    wait_timeout_ms: int = 60_000
    resident: int = 0

    def __post_init__(self):
        for name in ("threads", "delay_us", "seed", "wait_timeout_ms", "resident"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if name == "wait_timeout_ms" else 0):
                least = "a positive" if name == "wait_timeout_ms" else "a non-negative"
                raise ValueError(f"CpuOptions.{name}: expected {least} int, got {v!r}")


@dataclasses.dataclass(frozen=True)
class MlpPlan:
    """Everything static an op runs with; hashable, so it is a primitive param."""

    tile1: TileShape
    tile2: TileShape
    policy: Policy
    mode: str
    order1: str = "row_major"
    order2: str = "row_major"
    optimizations: Optimizations = Optimizations()
    kernel: int = 0
    cpu: CpuOptions = CpuOptions()
    # policy="auto" found XLA's own ops faster for this shape (measured, or
    # predicted by the wave model): synced_mlp runs plain jnp instead.
    fallback: bool = False
    # Band height (tile rows) of the "grouped" order, for both GEMMs.
    group_rows: int = 8
    # Kernel family 1: CTAs per cluster along the rows; 2 runs 2x1 clusters
    # that share each w tile through TMA multicast (128x128 tiles, no SwiGLU).
    cluster_m: int = 1
    # Kernel family 1, serial mode: (producer, consumer) GEMMs run stream-K
    # (cusync/stream_k.h) on stream_k_ctas CTAs. The CPU executor runs the
    # same math without it.
    stream_k: tuple = (False, False)
    stream_k_ctas: int = 0
    # Kernel family 1, whole 128x128 and 96x128 tiles without clusters or
    # stream-K: how the two MMA warpgroups share them (MMA_SCHEDULES).
    mma_schedule: str = "auto"

    def attributes(self, activation_code: int) -> dict:
        """The FFI attributes (names as in ffi/common/mlp_spec.h)."""
        return dict(
            activation=activation_code, policy=self.policy.code, under_wait=self.policy.under_wait,
            tile_m1=self.tile1.m, tile_n1=self.tile1.n, tile_k1=self.tile1.k,
            tile_m2=self.tile2.m, tile_n2=self.tile2.n, tile_k2=self.tile2.k,
            order1=ORDER_CODES[self.order1], order2=ORDER_CODES[self.order2],
            mode=MODE_CODES[self.mode], optimizations=self.optimizations.bits(),
            group_rows=self.group_rows, cluster_m=self.cluster_m,
            stream_k1=int(self.stream_k[0]), stream_k2=int(self.stream_k[1]), stream_k_ctas=self.stream_k_ctas,
            mma_schedule=MMA_SCHEDULES.index(self.mma_schedule),
            kernel=self.kernel, threads=self.cpu.threads, delay_us=self.cpu.delay_us,
            seed=self.cpu.seed, wait_timeout_ms=self.cpu.wait_timeout_ms, resident=self.cpu.resident)


def grid(rows: int, cols: int, tile: TileShape, slices: int = 1) -> tuple:
    """(tile rows, tile columns) of a stage; each slice is tiled on its own."""
    return math.ceil(rows / tile.m), slices * math.ceil(cols / tile.n)


# Stream-K pays where whole tiles fill the last wave badly and a tile's
# k-loop is long enough to carry the partial sums. Measured on the H200
# (bench/logs/h200-stream-k-*.log, h200-harness-*-stop15.log; GEMM alone):
# 128x128, 0.81-0.94x of the time of whole tiles where whole tiles take two
# waves or more and stream-K's ranges would take at most 0.9 of them, at K >=
# 6144; 1.12-1.32x at K = 2816. Where a row's tiles fit its share of the SMs,
# each tile is split evenly (cusync/stream_k.h): 64 tiles of 128x192 as 128
# halves ran in 0.72x of the whole tiles' time (GPT-3's first GEMM at 256
# tokens), 0.95x of 128x128's whole tiles.
STREAM_K_MIN_K_BLOCKS = 96
STREAM_K_MAX_WAVE_RATIO = 0.9
# The tiles of the Hopper kernel's stream-K instances (ffi/cuda/sm90_chain_stream_k*.cu).
STREAM_K_TILES = tuple(c.tile for c in kernels.CUDA_CONFIGS if c.kernel == 1 and c.stream_k)
# Stream-K's time over its even share of the work (the partial sums' stores and
# reloads, ranges that start mid-tile): measured 1.07-1.21 where the rule
# applies (bench/logs/h200-harness-few-5ae6b25.log), so the planner charges 1.15.
STREAM_K_OVERHEAD = 1.15


def stream_k_waves(rows: int, cols: int, k_blocks: int, sms: int) -> float:
    """Stream-K's time for rows x cols tiles of k_blocks k-blocks on `sms` SMs,
    in whole-tile waves: a range's k-blocks over a tile's (one CTA per SM;
    every row of tiles gets whole ranges, cusync/stream_k.h decides how many)."""
    per_row = stream_k_ctas_per_row(rows, cols, k_blocks, sms)
    return math.ceil(cols * k_blocks / per_row) / k_blocks


def stream_k_pays(rows: int, cols: int, k_blocks: int, sms: int) -> bool:
    """Whether a GEMM of rows x cols tiles of k_blocks k-blocks should run
    stream-K on `sms` SMs (one CTA each)."""
    whole_waves = math.ceil(rows * cols / max(1, sms))
    if k_blocks < STREAM_K_MIN_K_BLOCKS:
        return False
    return stream_k_waves(rows, cols, k_blocks, sms) <= STREAM_K_MAX_WAVE_RATIO * whole_waves


def makespan(durations: Sequence[float], slots: int) -> float:
    """Finish time of tiles handed out in order to the first free slot."""
    free = [0.0] * max(1, slots)
    heapq.heapify(free)
    end = 0.0
    for d in durations:
        t = heapq.heappop(free) + d
        end = max(end, t)
        heapq.heappush(free, t)
    return end


def tile_sequence(grid_: tuple, order: str, slices: int = 1, group_rows: int = 8) -> list:
    """A stage's tiles (row, col) in the order they are handed out, from the
    same tile_order.h the kernels use."""
    rows, cols = grid_
    if order == "row_major":
        return [(i // cols, i % cols) for i in range(rows * cols)]
    return stage_schedule(rows, cols // slices, slices, 1, 1, ORDER_CODES[order], group_rows)


def synced_makespan(g1: tuple, g2: tuple, rows: int, m1: int, m2: int, d1: float, d2: float,
                    slots: int, policy: Policy, slices: int = 1, order1: str = "row_major",
                    order2: str = "row_major", group_rows: int = 8) -> float:
    """Finish time of the fine-grained schedule: producer tiles in their
    order, then consumer tiles in theirs, each to the first free slot, where a
    consumer tile holds its slot while it waits. RowSync: it starts once every
    producer tile of the rows it reads is done (under a grouped order, when
    the band's column sweep ends). TileSync/StridedSync: its k-chunk j needs
    producer column tile j, so it ends no earlier than chunk j's readiness
    plus the work after it."""
    free = [0.0] * max(1, slots)
    heapq.heapify(free)
    r1, c1 = g1
    done = [[0.0] * c1 for _ in range(r1)]
    for r, c in tile_sequence(g1, order1, slices, group_rows):
        t = heapq.heappop(free) + d1
        done[r][c] = t
        heapq.heappush(free, t)
    per_slice = c1 // max(1, slices)
    end = 0.0
    for row, _ in tile_sequence(g2, order2, 1, group_rows):
        lo = row * m2 // m1
        hi = (min(rows, (row + 1) * m2) - 1) // m1
        start = heapq.heappop(free)
        if isinstance(policy, RowSync):
            t = max(start, max(max(done[r]) for r in range(lo, hi + 1))) + d2
        else:
            t = start + d2
            for j in range(per_slice):
                ready = max(done[r][j + s * per_slice] for r in range(lo, hi + 1)
                            for s in range(slices))
                t = max(t, ready + d2 * (per_slice - j) / per_slice)
        end = max(end, t)
        heapq.heappush(free, t)
    return end


@dataclasses.dataclass(frozen=True)
class WaveReport:
    """The wave model's numbers for a producer/consumer pair of tiled stages
    and the plan chosen from them (shared by every op's planner)."""

    device: str
    tile1: TileShape
    tile2: TileShape
    grid1: tuple
    grid2: tuple
    tiles1: int
    tiles2: int
    slots: int
    waves_stream: int
    waves_synced: int
    makespan_stream: float   # simulated, in multiply-adds per slot
    makespan_synced: float
    policy: Policy
    mode: str
    plan: MlpPlan

    @property
    def waves_saved(self) -> int:
        return self.waves_stream - self.waves_synced


@dataclasses.dataclass(frozen=True)
class MlpPlanReport(WaveReport):
    """What plan_mlp decided and why."""

    tokens: int = 0
    hidden: int = 0
    ffn: int = 0
    out: int = 0
    activation: str = ""
    # Where the choice came from: "measured" (a tuned table, cusync_jax/tuning.py),
    # "model" (the wave model), "unaligned" (a shape the CUDA kernels cannot
    # load: XLA's ops) or "user" (explicit policy, mode or tile).
    source: str = "model"

    @property
    def fallback(self) -> bool:
        return self.plan.fallback


def _auto_policy(tokens: int, activation: str, tile1: TileShape, config) -> Policy:
    """SwiGLU consumers read two column slices: StridedSync groups them (where
    the kernel measured it faster than RowSync). Otherwise the paper's
    finding: TileSync wins while the producer has few tile rows (small
    batch), RowSync above; the bound is the kernel's measured
    `tile_sync_rows` (2 for the CPU executor and what-if models)."""
    slices = activation_slices(activation)
    if slices > 1 and (config is None or config.swiglu_strided):
        return StridedSync(slices)
    tile_sync_rows = config.tile_sync_rows if config else 2
    return TileSync() if math.ceil(tokens / tile1.m) <= tile_sync_rows else RowSync()


def _as_tiles(tile) -> tuple:
    if tile is None:
        return None
    if isinstance(tile, TileShape):
        return tile, tile
    if (isinstance(tile, (tuple, list)) and len(tile) == 2
            and all(isinstance(t, (tuple, list, TileShape)) for t in tile)):
        return tuple(t if isinstance(t, TileShape) else TileShape(*t) for t in tile)
    if isinstance(tile, (tuple, list)) and len(tile) in (2, 3):
        t = TileShape(*tile) if len(tile) == 3 else TileShape(tile[0], tile[1], 64)
        return t, t
    raise ValueError(
        "tile: expected (m, n), (m, n, k), a TileShape, or a pair of them for the two GEMMs; "
        f"got {tile!r}")


def _report(device: DeviceModel, tokens, hidden, ffn, out, activation, tile1, tile2, policy, mode,
            order1, order2, optimizations, kernel, cpu, ctas=None, group_rows=8,
            cluster_m=1) -> MlpPlanReport:
    slices = activation_slices(activation)
    g1 = grid(tokens, ffn, tile1, slices)
    g2 = grid(tokens, out, tile2)
    t1, t2 = g1[0] * g1[1], g2[0] * g2[1]
    if ctas is None:
        ctas = min(device.ctas_per_sm(tile1), device.ctas_per_sm(tile2))
    slots = device.sms * ctas
    d1 = [float(tile1.m * tile1.n * hidden)] * t1   # multiply-adds of one tile
    d2 = [float(tile2.m * tile2.n * ffn)] * t2
    plan = MlpPlan(tile1, tile2, policy, mode, order1, order2, optimizations, kernel, cpu,
                   group_rows=group_rows, cluster_m=cluster_m)
    return MlpPlanReport(
        device=device.name, tokens=tokens, hidden=hidden, ffn=ffn, out=out, activation=activation,
        tile1=tile1, tile2=tile2, grid1=g1, grid2=g2, tiles1=t1, tiles2=t2, slots=slots,
        waves_stream=math.ceil(t1 / slots) + math.ceil(t2 / slots),
        waves_synced=math.ceil((t1 + t2) / slots),
        makespan_stream=makespan(d1, slots) + makespan(d2, slots),
        makespan_synced=synced_makespan(g1, g2, tokens, tile1.m, tile2.m, d1[0] if d1 else 0.0,
                                        d2[0] if d2 else 0.0, slots, policy, slices, order1,
                                        order2, group_rows),
        policy=policy, mode=mode, plan=plan)


TILE_ORDERS = ("row_major", "column_major", "grouped")
# How kernel family 1 runs whole 128x128 and 96x128 tiles (codes as in
# ffi/common/plan_attrs.h): "pingpong", each MMA warpgroup owns every other
# tile, so one's epilogue runs under the other's mainloop; "cooperative",
# both on every tile, 64 rows (96x128: 64 weight columns) each; "auto", cooperative where a launch gives
# a CTA at most two tiles. Measured (bench/NOTES_sm90.md, stop 17):
# cooperative 0.86-0.95x of pingpong's time at 256 tokens in every mode,
# 1.03-1.10x from 1536 tokens on in serial and RowSync modes, 0.95-1.0x with
# TileSync; at 512 tokens in serial mode pingpong won.
MMA_SCHEDULES = ("auto", "pingpong", "cooperative")


def plan_mlp(tokens: int, hidden: int, ffn: int, out: Optional[int] = None, *,
             activation: str = "gelu", device="h200", tile=None, policy="auto", mode="auto",
             optimizations: Optional[Optimizations] = None,
             cpu: Optional[CpuOptions] = None, dtype=None, order: Optional[str] = None,
             group_rows: int = 8, cluster_m: int = 1, stream_k=None, mma_schedule: str = "auto",
             allow_fallback: bool = True) -> MlpPlanReport:
    """Plans y = act(x @ w1) @ w2 with x [tokens, hidden], w1 [hidden, ffn]
    (2 * ffn for SwiGLU), w2 [ffn, out] (out defaults to hidden).

    device: "cpu", a name in DEVICES, or a DeviceModel. Returns the report of
    the chosen plan; ``report.plan`` is what the op runs with.

    With policy, mode and tile all automatic on a GPU, the device's tuned
    table (cusync_jax/tuning.py) decides where it has measured this shape and
    dtype; elsewhere the wave model does, at each kernel's measured rate. Where
    XLA's own ops win, the plan falls back to them (``report.fallback``)
    unless ``allow_fallback=False``. On a GPU, hidden, ffn and out must be
    multiples of 8 (the kernels copy 16-byte rows): otherwise an automatic
    plan falls back (source "unaligned") and any other raises.

    order: the tile order of both GEMMs: "row_major", "column_major" (a wave
    covers every row of few weight columns, so weights are read about once)
    or "grouped" (column-major within bands of 8 tile rows: few re-reads of
    either operand at any token count); None: the kernel's measured default
    (grouped on Hopper, row-major elsewhere), or strided where StridedSync
    needs it. group_rows: the grouped order's band height in tile rows
    (lower: rows finish sooner, so RowSync consumers start sooner; higher:
    more L2 reuse).

    cluster_m: 1, or 2 to run the Hopper kernel (family 1) in 2x1 clusters:
    two CTAs compute vertically adjacent 128x128 tiles of one column and load
    each weight tile once for both (TMA multicast). Only 128x128x64 tiles
    (the default with cluster_m=2) and activations other than SwiGLU. The
    wave model does not model it: policy="auto" takes it only where the
    measured table (cusync_jax/tuned) says it won.

    stream_k: where the plan runs in serial mode on the Hopper kernel
    (family 1, cluster_m=1), run a GEMM with 128x128x64 or 128x192x64 tiles
    stream-K: its k-blocks cut into equal ranges, one per SM, instead of
    whole tiles, each tile split evenly where a row's tiles fit its share of
    the SMs (cusync/stream_k.h). None or False: neither GEMM; True: both; a
    (producer, consumer) pair of bools; "auto": each GEMM where stream_k_pays
    says so, with tiles chosen knowing it (a GEMM may take stream-K over
    wider whole tiles). Opt-in: measured 0.72-0.93x of whole tiles' time
    where the rule applies (bench/NOTES_sm90.md); the measured table may
    name it.

    mma_schedule: how the Hopper kernel runs whole 128x128x64 and 96x128x64 tiles (of a
    GEMM without clusters or stream-K): "pingpong", "cooperative" or "auto"
    (MMA_SCHEDULES says when each won); the measured table may name one.
    """
    rep = _plan_mlp(tokens, hidden, ffn, out, activation=activation, device=device, tile=tile,
                    policy=policy, mode=mode, optimizations=optimizations, cpu=cpu, dtype=dtype,
                    order=order, group_rows=group_rows, cluster_m=cluster_m, stream_k=stream_k,
                    mma_schedule=mma_schedule, allow_fallback=allow_fallback)
    rep = _checked_alignment(rep, device, cpu, allow_fallback)
    return _with_mma_schedule(_with_stream_k(rep, stream_k, device, cpu), mma_schedule)


def _checked_alignment(rep: MlpPlanReport, device, cpu, allow_fallback: bool) -> MlpPlanReport:
    """Both CUDA kernel families copy 16-byte row chunks (TMA rows, cp.async):
    a GPU plan of other widths falls back where it was automatic, else raises."""
    aligned = rep.hidden % 8 == 0 and rep.ffn % 8 == 0 and rep.out % 8 == 0
    if aligned or rep.fallback or resolve_device(device, cpu or CpuOptions())[1]:
        return rep
    if rep.source != "user" and allow_fallback:
        return _as_fallback(rep, "unaligned")
    raise ValueError(f"x, w1, w2: the CUDA kernels need hidden, ffn and out multiples of 8 (16-byte rows); "
                     f"got hidden {rep.hidden}, ffn {rep.ffn}, out {rep.out}. Pad the weights, or leave "
                     f"policy, mode and tile automatic to run XLA's ops for this shape")


def _with_mma_schedule(rep: MlpPlanReport, mma_schedule: str) -> MlpPlanReport:
    if mma_schedule == "auto" or rep.plan.fallback:
        return rep
    plan = rep.plan
    two_forms = (TileShape(128, 128, 64), TileShape(96, 128, 64))
    chooses = (plan.kernel == 1 and plan.cluster_m == 1 and
               any(t in two_forms and not sk for t, sk in zip((plan.tile1, plan.tile2), plan.stream_k)))
    if not chooses:
        raise ValueError(f"mma_schedule={mma_schedule!r}: applies to whole 128x128x64 and 96x128x64 tiles of the "
                         f"Hopper kernel (family 1) without clusters or stream-K; the plan runs kernel {plan.kernel}, tiles "
                         f"{plan.tile1.text} and {plan.tile2.text}, cluster_m {plan.cluster_m}, stream_k "
                         f"{plan.stream_k}")
    return dataclasses.replace(rep, plan=dataclasses.replace(plan, mma_schedule=mma_schedule))


def _with_stream_k(rep: MlpPlanReport, stream_k, device, cpu) -> MlpPlanReport:
    if stream_k is None:
        return rep
    if stream_k == "auto" or isinstance(stream_k, bool):
        pair = None if stream_k == "auto" else (stream_k, stream_k)
    elif (isinstance(stream_k, (tuple, list)) and len(stream_k) == 2
          and all(isinstance(v, bool) for v in stream_k)):
        pair = tuple(stream_k)
    else:
        raise ValueError(f"stream_k: expected None, 'auto', a bool or a (producer, consumer) pair of "
                         f"bools, got {stream_k!r}")
    plan = rep.plan
    # Per GEMM: stream-K runs in serial mode on the Hopper kernel's stream-K
    # instances, without clusters.
    serial = plan.mode == "serial" and plan.kernel == 1 and plan.cluster_m == 1
    runs_it = tuple(serial and t in STREAM_K_TILES for t in (plan.tile1, plan.tile2))
    if plan.fallback or (pair is None and not any(runs_it)) or pair == (False, False):
        return rep
    if pair is not None and any(on and not ok for on, ok in zip(pair, runs_it)):
        raise ValueError(f"stream_k={stream_k!r}: stream-K runs in serial mode on the Hopper kernel "
                         f"(family 1) with {' or '.join(t.text for t in STREAM_K_TILES)} tiles and no "
                         f"clusters; the plan runs "
                         f"mode {plan.mode!r}, kernel {plan.kernel}, tiles {plan.tile1.text} and "
                         f"{plan.tile2.text}, cluster_m {plan.cluster_m}")
    model, _ = resolve_device(device, cpu or CpuOptions())
    if pair is None:
        pair = _auto_stream_k(rep, model.sms)
        if pair == (False, False):
            return rep
    plan = dataclasses.replace(plan, stream_k=pair, stream_k_ctas=model.sms)
    return dataclasses.replace(rep, plan=plan)


def _auto_stream_k(rep: MlpPlanReport, sms: int) -> tuple:
    """Per GEMM, whether stream_k="auto" runs it stream-K: in serial mode on
    the Hopper kernel without clusters, with a stream-K tile, where
    stream_k_pays says so."""
    plan = rep.plan
    if not (plan.mode == "serial" and plan.kernel == 1 and plan.cluster_m == 1):
        return (False, False)
    return tuple(t in STREAM_K_TILES and stream_k_pays(*g, -(-k // t.k), sms)
                 for t, g, k in ((plan.tile1, rep.grid1, rep.hidden), (plan.tile2, rep.grid2, rep.ffn)))


def _plan_mlp(tokens: int, hidden: int, ffn: int, out: Optional[int] = None, *,
              activation: str = "gelu", device="h200", tile=None, policy="auto", mode="auto",
              optimizations: Optional[Optimizations] = None,
              cpu: Optional[CpuOptions] = None, dtype=None, order: Optional[str] = None,
              group_rows: int = 8, cluster_m: int = 1, stream_k=None, mma_schedule: str = "auto",
              allow_fallback: bool = True) -> MlpPlanReport:
    for name, v in (("tokens", tokens), ("hidden", hidden), ("ffn", ffn)):
        if not isinstance(v, int) or v < 0 or (v == 0 and name != "tokens"):
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    out = hidden if out is None else out
    activation = check_activation(activation)
    if mode not in ("auto",) + MODES:
        raise ValueError(f"mode: expected 'auto' or one of {MODES}, got {mode!r}")
    optimizations = Optimizations() if optimizations is None else optimizations
    if not isinstance(optimizations, Optimizations):
        raise TypeError(f"optimizations: expected an Optimizations, got {type(optimizations).__name__}")
    cpu = CpuOptions() if cpu is None else cpu
    if not isinstance(cpu, CpuOptions):
        raise TypeError(f"cpu: expected a CpuOptions, got {type(cpu).__name__}")
    chosen_policy = parse_policy(policy)
    if isinstance(chosen_policy, Conv2DTileSync):
        raise ValueError("policy: Conv2DTileSync is the conv pair's policy; synced_mlp takes TileSync, "
                         "RowSync or StridedSync")
    slices = activation_slices(activation)
    if isinstance(chosen_policy, StridedSync) and chosen_policy.slices != slices:
        raise ValueError(
            f"policy: StridedSync({chosen_policy.slices}) needs an activation whose w1 has "
            f"{chosen_policy.slices} column slices; activation {activation!r} has {slices}")
    if order not in (None,) + TILE_ORDERS:
        raise ValueError(f"order: expected None or one of {TILE_ORDERS}, got {order!r}")
    if not isinstance(group_rows, int) or group_rows < 1:
        raise ValueError(f"group_rows: expected a positive int, got {group_rows!r}")
    if not isinstance(cluster_m, int) or isinstance(cluster_m, bool) or cluster_m not in (1, 2):
        raise ValueError(f"cluster_m: expected 1 or 2, got {cluster_m!r}")
    if mma_schedule not in MMA_SCHEDULES:
        raise ValueError(f"mma_schedule: expected one of {MMA_SCHEDULES}, got {mma_schedule!r}")
    tiles = _as_tiles(tile)
    if cluster_m == 2:
        if slices > 1:
            raise ValueError(f"cluster_m=2: the 2x1-cluster kernel has no SwiGLU form; activation "
                             f"{activation!r} needs cluster_m=1")
        tiles = tiles or (TileShape(128, 128, 64), TileShape(128, 128, 64))
        if any((t.m, t.n, t.k) != (128, 128, 64) for t in tiles):
            raise ValueError(f"cluster_m=2: runs 128x128x64 tiles only, got {tiles[0]} and {tiles[1]}")
    model, on_cpu = resolve_device(device, cpu)
    if cluster_m == 2 and not on_cpu and model.arch != 90:
        raise ValueError(f"cluster_m=2: runs on the Hopper kernel (compute capability 9.0); "
                         f"device {model.name} is {model.arch / 10:.1f}")
    run_mode = "fused" if mode == "auto" else mode
    automatic = (chosen_policy is None and mode == "auto" and tiles is None and order is None
                 and group_rows == 8 and cluster_m == 1 and stream_k is None and mma_schedule == "auto")
    tuned = automatic and allow_fallback and not on_cpu

    def xla_instead(source):
        # What would run without the fallback, marked to run XLA's ops.
        rep = _plan_mlp(tokens, hidden, ffn, out, activation=activation, device=model,
                        optimizations=optimizations, cpu=cpu, allow_fallback=False)
        return _as_fallback(rep, source)

    if tuned and _dtype_name(dtype) not in (None, "float16", "bfloat16"):
        return xla_instead("model")  # the GPU kernels take float16 and bfloat16
    if tuned:
        choice = tuning.lookup(model.name, tokens, hidden, ffn, out, activation, _dtype_name(dtype))
        if choice is not None:
            if choice.fallback:
                return xla_instead("measured")
            rep = plan_mlp(tokens, hidden, ffn, out, activation=activation, device=model,
                           tile=choice.tile, policy=choice.policy, mode=choice.mode,
                           order=choice.order, group_rows=choice.group_rows,
                           cluster_m=choice.cluster_m, stream_k=choice.stream_k,
                           mma_schedule=choice.mma_schedule, optimizations=optimizations, cpu=cpu)
            return dataclasses.replace(rep, source="measured")

    # Candidates: (tile1, tile2, kernel config or None for the CPU / a model).
    runnable = kernels.cuda_configs_for_arch(model.arch)
    if on_cpu:
        t1, t2 = tiles or (kernels.CPU_DEFAULT_TILE, kernels.CPU_DEFAULT_TILE)
        candidates = [(t1, t2, None)]
    elif tiles is not None:
        # Any tile shape is valid for the wave model; running it on a GPU
        # checks it against the compiled kernels.
        known = [next((c for c in runnable if c.tile == t), None) for t in tiles]
        if known[0] and slices > 1 and not known[0].swiglu:
            raise ValueError(f"tile: {tiles[0].text} has no SwiGLU form; activation {activation!r} "
                             f"takes one of {[c.tile.text for c in runnable if c.swiglu]}")
        if tiles[0] != tiles[1] and known[0] and known[0].kernel == 1 and mode == "fused":
            raise ValueError(f"tile: the fused mode runs both GEMMs in one kernel, so with one tile; got "
                             f"{tiles[0].text} and {tiles[1].text} (take mode 'serial' or 'streams')")
        candidates = [(tiles[0], tiles[1], tuple(known) if known[0] and known[1] else None)]
    elif runnable:
        chosen = [c for c in runnable if c.automatic]
        candidates = [(c.tile, c.tile, (c, c)) for c in chosen if slices == 1 or c.swiglu]
        if mode in ("auto", "serial", "streams"):
            # The Hopper kernel launches each GEMM on its own outside the
            # fused mode, so each may take the tile that fills the SMs best.
            candidates += [(c1.tile, c2.tile, (c1, c2)) for c1 in chosen for c2 in chosen
                           if c1 != c2 and c1.kernel == c2.kernel == 1 and (slices == 1 or c1.swiglu)]
    else:
        raise ValueError(f"device: no CUDA kernel of this build runs on {model.name} "
                         f"(compute capability {model.arch / 10:.1f}); the kernels need 8.0 or 9.0")

    best = None
    for t1, t2, configs in candidates:
        c1, c2 = configs or (None, None)
        pol = chosen_policy or _auto_policy(tokens, activation, t1, c1)
        default = c1.default_order if c1 else "row_major"
        order1 = order or ("strided" if isinstance(pol, StridedSync) else default)
        # Two tiles: the GEMMs run on launches of their own (serial, unless asked for streams).
        cand_mode = "serial" if (t1 != t2 and mode == "auto" and c1) else run_mode
        rep = _report(model, tokens, hidden, ffn, out, activation, t1, t2, pol, cand_mode, order1,
                      order or default, optimizations, c1.kernel if c1 else 0, cpu,
                      ctas=min(c1.ctas_per_sm, c2.ctas_per_sm) if (c1 and not model.ctas) else None,
                      group_rows=group_rows, cluster_m=cluster_m)
        # Simulated multiply-adds per slot over the kernel's measured rate.
        if mode == "auto" and not on_cpu and rep.makespan_synced > 0.99 * rep.makespan_stream:
            # Nothing to save: synchronization can only cost, so run in stream
            # order (measured: 0.95-0.96x of serial where everything fits).
            rep = dataclasses.replace(rep, mode="serial",
                                      plan=dataclasses.replace(rep.plan, mode="serial"))
        # Makespans count multiply-adds per slot; CTAs sharing an SM share its
        # rate, so time scales with slots per SM, over the measured rate.
        per_sm = rep.slots / model.sms
        r1, r2 = (c1.relative_rate, c2.relative_rate) if c1 else (1.0, 1.0)
        if rep.mode == "serial":
            # stream_k="auto": a GEMM that will run stream-K is charged its
            # even share of the work instead of whole waves.
            sk = _auto_stream_k(rep, model.sms) if stream_k == "auto" else (False, False)
            stage_cost = []
            for t, g, k, n, r, on in ((t1, rep.grid1, hidden, rep.tiles1, r1, sk[0]),
                                      (t2, rep.grid2, ffn, rep.tiles2, r2, sk[1])):
                unit = t.m * t.n * k
                c = (stream_k_waves(*g, -(-k // t.k), model.sms) * unit * STREAM_K_OVERHEAD if on
                     else makespan([unit] * n, rep.slots))
                stage_cost.append(c / r)
            cost = per_sm * sum(stage_cost)
        else:
            cost = per_sm * rep.makespan_synced / min(r1, r2)
        if best is None or cost < best[0]:
            best = (cost, rep)
    cost, rep = best
    per_sm = rep.slots / model.sms
    if not automatic:
        return dataclasses.replace(rep, source="user")
    # XLA's GEMMs modelled at full rate in stream order: where ours cannot make
    # up their measured rate gap with what synchronization saves, use XLA.
    if tuned and cost > rep.makespan_stream * per_sm:
        return _as_fallback(rep, "model")
    return rep


def _as_fallback(rep: MlpPlanReport, source: str) -> MlpPlanReport:
    return dataclasses.replace(rep, source=source, plan=dataclasses.replace(rep.plan, fallback=True))


def _dtype_name(dtype) -> Optional[str]:
    if dtype is None:
        return None
    import numpy as np
    return np.dtype(dtype).name
