"""The conv pair's plan: the MLP's wave model applied to two implicit GEMMs.

Both convolutions of the pair are GEMMs over the N*H*W output pixels:
the producer's tiles cover [pixels, C1] with k = R1*S1*C0, the consumer's
[pixels, C2] with k = R2*S2*C1 (tap-major, so a k-block is one filter tap's
channel block). The plan has the same fields as the MLP's; only how it is
chosen differs.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from . import _cusync_cpu, conv_unfold, kernels, tuning
from ._op_common import check_mode
from .activations import check_activation
from .kernels import TileShape
from .planner import (CpuOptions, MlpPlan, WaveReport, _as_tiles, _dtype_name, grid, makespan,
                      resolve_device)
from .policies import MODE_CODES, Conv2DTileSync, Optimizations, Policy, StridedSync, parse_policy

FILTERS = ((1, 1), (3, 3))
# The halo conv's conv 1 takes an input of 8 channels (cusync/halo_tiling.h,
# kHaloPixel8Channels): an image of fewer is padded to it.
PIXEL8_CHANNELS = 8


@dataclasses.dataclass(frozen=True)
class ConvPairPlan(MlpPlan):
    """Everything static a conv pair runs with (the MLP plan's fields: tiles of
    the two implicit GEMMs, policy, mode, tile orders, optimizations, kernel,
    CPU options, and split_k); hashable, so it is a primitive param."""

    # CTAs sharing one output tile's k-blocks, (producer, consumer), on the
    # CUDA kernel (the CPU executor runs the same math unsplit). (1, 1): none.
    split_k: tuple = (1, 1)
    # Conv 1 runs as a 1x1 convolution over its input's unfolded R1 x S1
    # windows (conv_unfold.py): the Hopper conv with an input whose channels
    # are no multiple of 64 (VGG's RGB image). The plan's other fields are
    # for the unfolded pair.
    unfold1: bool = False
    # Conv 1's input and filter zero-padded to 8 channels (PIXEL8_CHANNELS):
    # the halo conv with an image of fewer channels (VGG's RGB image) reads
    # 16-byte pixels, no unfold. The plan's other fields are for the padded pair.
    pixel8: bool = False

    def attributes(self, activation_code: int) -> dict:
        """The FFI attributes (names as in ffi/common/conv_spec.h)."""
        return dict(super().attributes(activation_code), splits1=self.split_k[0],
                    splits2=self.split_k[1])


def conv_k_blocks(filter_: tuple, channels: int, tile: TileShape) -> int:
    """k-blocks of a conv's implicit GEMM: filter taps x channel blocks of tile.k."""
    return filter_[0] * filter_[1] * -(-channels // tile.k)


def conv_sync_words(images: int, height: int, width: int, channels: tuple, filters: tuple,
                    plan: ConvPairPlan) -> int:
    """The conv pair's sync buffer: the semaphores, then with split-K a count per
    tile of each conv and (from a 4-word boundary) the float32 partial sums, a
    tile per share (on the Hopper conv, which splits stream-K, a tile per
    stream-K range a tile meets) and, for the Hopper conv's fused mode, one
    placed-schedule flag per tile of each conv; the C++ layout the handlers
    check it against (cusync/sync_layout.h, conv_split_layout). channels:
    (C0, C1, C2); filters: ((R1, S1), (R2, S2))."""
    t1, t2 = plan.tile1, plan.tile2
    c0, c1, c2 = channels
    (r1, s1), (r2, s2) = filters
    return _cusync_cpu.conv_sync_words(images, height, width, c0, c1, c2, [r1, s1, r2, s2], [t1.m, t1.n, t1.k],
                                       [t2.m, t2.n, t2.k], plan.split_k[0], plan.split_k[1], plan.kernel,
                                       MODE_CODES[plan.mode])


def check_conv_activation(activation, name: str = "activation") -> str:
    activation = check_activation(activation, name)
    if activation == "swiglu":
        raise ValueError(f"{name}: 'swiglu' needs [gate | up] halves of a GEMM's columns; the "
                         "conv pair takes 'relu', 'gelu', 'gelu_tanh', 'silu' or 'identity'")
    return activation


def resolve_conv_policy(policy, filter2: tuple) -> Optional[Policy]:
    """The policy for a consumer with an R2 x S2 filter; None for "auto".

    Conv2DTileSync named by a string or its class takes the consumer's
    filter; an instance must match it."""
    named = isinstance(policy, str) or isinstance(policy, type)
    pol = parse_policy(policy)
    if isinstance(pol, StridedSync):
        raise ValueError(f"policy: {pol!r} groups column slices of a SwiGLU-like producer; the conv "
                         "pair takes TileSync, RowSync or Conv2DTileSync")
    if isinstance(pol, Conv2DTileSync):
        if named:
            return dataclasses.replace(pol, r=filter2[0], s=filter2[1])
        if (pol.r, pol.s) != tuple(filter2):
            raise ValueError(f"policy: Conv2DTileSync(r={pol.r}, s={pol.s}) does not match k2's "
                             f"{filter2[0]}x{filter2[1]} filter; use Conv2DTileSync({filter2[0]}, "
                             f"{filter2[1]})")
    return pol


def _cpu_k_block(channels: int) -> int:
    """The largest divisor of `channels` up to 64, so a k-block of the CPU
    executor stays within one filter tap (its waits then cover one channel
    block, not every channel)."""
    return max(d for d in range(1, min(channels, 64) + 1) if channels % d == 0)


def _check_sm90_conv(model, tiles, channels, f1, f2, split_k, mode) -> None:
    """What the Hopper conv (kernels.CONV_SM90_CONFIGS) needs, said before anything runs."""
    hopper = {c.tile for c in kernels.CONV_SM90_CONFIGS}
    if model.arch not in (0, 90):
        raise ValueError(f"tile: {tiles[0].text} is the Hopper conv's (compute capability 9.0); device "
                         f"{model.name} is {model.arch / 10:.1f}")
    if tiles[1] not in hopper:
        raise ValueError(f"tile: the Hopper conv runs both convolutions on {sorted(t.text for t in hopper)}; "
                         f"got {tiles[0].text} and {tiles[1].text}")
    if mode == "fused" and tiles[0] != tiles[1]:
        raise ValueError(f"tile: the fused mode runs both convolutions in one kernel, so with one tile; got "
                         f"{tiles[0].text} and {tiles[1].text} (take mode 'serial' or 'streams')")
    c0, c1, c2 = channels  # (in channels that are no multiple of 64 were unfolded before this)
    if c1 % 64 or c2 % 8:
        raise ValueError(f"channels: the Hopper conv needs mid channels that are a multiple of 64 and "
                         f"out channels a multiple of 8 (a k-block is one filter tap's 64 channels; in "
                         f"channels that are not a multiple of 64 run unfolded); got {c0}, {c1}, {c2}")
    if split_k != (1, 1) and mode != "serial":
        raise ValueError(f"split_k: the Hopper conv splits k (stream-K, unsynchronized) in mode 'serial' only; "
                         f"got split_k={split_k} with mode {mode!r}")


def _check_halo_conv(model, tiles, channels, f1, f2, split_k, activation) -> None:
    """What the halo conv (kernels.CONV_HALO_CONFIGS) needs, said before anything runs."""
    if activation not in ("relu", "identity"):
        raise ValueError(f"activation: the halo conv's epilogue applies 'relu' or 'identity'; got {activation!r} "
                         f"(take another tile)")
    halo = kernels.CONV_HALO_CONFIGS[0].tile
    if model.arch not in (0, 90):
        raise ValueError(f"tile: {halo.text} is the halo conv's (compute capability 9.0); device "
                         f"{model.name} is {model.arch / 10:.1f}")
    if tiles[1] != halo:
        raise ValueError(f"tile: the halo conv runs both convolutions on {halo.text}; got {tiles[0].text} "
                         f"and {tiles[1].text}")
    if f1 != (3, 3) or f2 != (3, 3):
        raise ValueError(f"filter: the halo conv runs 3x3 filters; got {f1[0]}x{f1[1]} and {f2[0]}x{f2[1]}")
    if (channels[0] % 64 and channels[0] != PIXEL8_CHANNELS) or channels[1] % 64 or channels[2] % 64:
        raise ValueError(f"channels: the halo conv needs in, mid and out channels that are multiples of 64 "
                         f"(in channels also {PIXEL8_CHANNELS} or fewer: an image, padded); got {channels}")
    if channels[0] == PIXEL8_CHANNELS and split_k[0] != 1:
        raise ValueError(f"split_k: the halo conv does not split a conv over {PIXEL8_CHANNELS} input channels "
                         f"(one channel block); got split_k={split_k}")
    for name, shares, c_in in (("producer", split_k[0], channels[0]), ("consumer", split_k[1], channels[1])):
        if (c_in // 64) % shares:
            raise ValueError(f"split_k: the halo conv splits a conv along its input channel blocks of 64, "
                             f"evenly; the {name} conv has {c_in // 64}, which {shares} shares do not divide "
                             f"(split_k={split_k})")


def _as_filter(name: str, f) -> tuple:
    f = (f, f) if isinstance(f, int) else tuple(f)
    if f not in FILTERS:
        raise ValueError(f"{name}: expected a 1x1 or 3x3 filter, got {f!r}")
    return f


@dataclasses.dataclass(frozen=True)
class ConvPairPlanReport(WaveReport):
    """What plan_conv_pair decided and why."""

    images: int = 0
    height: int = 0
    width: int = 0
    channels: tuple = ()   # (C0, C1, C2)
    filters: tuple = ()    # ((R1, S1), (R2, S2))
    activation: str = ""
    # Where the choice came from: "measured" (the tuned table, cusync_jax/tuning.py),
    # "model" (the wave model) or "user" (explicit policy, mode, tile or split).
    source: str = "model"

    @property
    def fallback(self) -> bool:
        return self.plan.fallback


def plan_conv_pair(images: int, height: int, width: int, in_channels: int, mid_channels: int,
                   out_channels: Optional[int] = None, *, filter1=3, filter2=3,
                   activation: str = "relu", device="h200", tile=None, policy="auto",
                   mode="auto", optimizations: Optional[Optimizations] = None,
                   cpu: Optional[CpuOptions] = None, split_k=(1, 1),
                   allow_fallback: bool = True, dtype=None, residual: bool = False) -> ConvPairPlanReport:
    """Plans y = conv(act(conv(x, k1)), k2) with x [images, height, width,
    in_channels], k1 [R1, S1, in_channels, mid_channels], k2 [R2, S2,
    mid_channels, out_channels] (out_channels defaults to mid_channels).

    filter1, filter2: 1 or 3 (or (1, 1), (3, 3)). device: "cpu", a name in
    DEVICES, or a DeviceModel. ``report.plan`` is what the op runs with.

    With policy, mode and tile all automatic on a GPU, the plan is the tuned
    table's where it measured this pair (``report.source == "measured"``,
    cusync_jax/tuning.py; dtype, a float dtype or its name, picks the table's
    rows of that dtype, None any; residual, a pair that adds a residual as
    ResNet's blocks do, picks the table measured with it): a synced variant, or XLA's own
    convolutions (``report.fallback``) where none was faster. Elsewhere it
    falls back where the wave model, at the kernel's measured rate against
    cuDNN, says XLA is faster. Pass ``allow_fallback=False`` (or any explicit
    choice) to run the synced kernels.

    split_k: (producer, consumer), how many CTAs share each output tile's
    k-blocks on the CUDA kernel: float32 partial sums in the call's scratch
    buffer, added by the share that ends last, which alone stores (and posts)
    the tile. The Hopper conv (tile=(128, 64, 64) or (128, 128, 64)) splits in
    serial mode only, stream-K over tiles x split CTAs (an even split where
    the split divides the k-blocks). Deep layers at small batch have few
    tiles and long k loops (ResNet's 7x7x512 at batch 1: 8 tiles of 144
    k-blocks). (1, 1): none. At most each conv's k-block count; an explicit
    choice the wave model does not make.

    tile=(128, 64, 576) runs the halo conv (kernel family 2, Hopper): each
    tile's input loaded once as a halo of padded rows and read by all 9 taps;
    3x3 filters, channels that are multiples of 64, 'relu' or 'identity';
    every mode and policy. Its split_k divides each conv's input channel
    blocks of 64 evenly (ResNet's 7x7x512 at batch 1: 8 output tiles of 8
    blocks each, split 8 ways, run on 64 SMs instead of 8). An input of 8
    channels or fewer (an RGB image) is padded to 8 and read as 16-byte
    pixels (``report.plan.pixel8``; the report's channels are the padded
    pair's).

    The Hopper conv with in_channels that are no multiple of 64 (an RGB
    image) plans conv 1 as a 1x1 conv over the input's unfolded windows
    (``report.plan.unfold1``; the report's channels and filters are the
    unfolded pair's, conv_unfold.py).
    """
    for name, v in (("images", images), ("height", height), ("width", width),
                    ("in_channels", in_channels), ("mid_channels", mid_channels)):
        if not isinstance(v, int) or v < 0 or (v == 0 and name != "images"):
            raise ValueError(f"{name}: expected a positive int, got {v!r}")
    out_channels = mid_channels if out_channels is None else out_channels
    f1, f2 = _as_filter("filter1", filter1), _as_filter("filter2", filter2)
    activation = check_conv_activation(activation)
    check_mode(mode)
    optimizations = optimizations or Optimizations()
    cpu = cpu or CpuOptions()
    chosen_policy = resolve_conv_policy(policy, f2)
    tiles = _as_tiles(tile)
    model, on_cpu = resolve_device(device, cpu)
    split_k = tuple(split_k) if isinstance(split_k, list) else split_k
    if (not isinstance(split_k, tuple) or len(split_k) != 2
            or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in split_k)):
        raise ValueError(f"split_k: expected (producer, consumer) positive ints, got {split_k!r}")
    run_mode = "fused" if mode == "auto" else mode

    if on_cpu:
        default = kernels.CPU_DEFAULT_TILE
        t1, t2 = tiles or (TileShape(default.m, default.n, _cpu_k_block(in_channels)),
                           TileShape(default.m, default.n, _cpu_k_block(mid_channels)))
        candidates = [(t1, t2, None)]
    elif tiles is not None:
        known = {c.tile: c for c in kernels.CONV_CUDA_CONFIGS + kernels.CONV_SM90_CONFIGS
                 + kernels.CONV_HALO_CONFIGS}
        config = known.get(tiles[0])

        def transformed(c0: int, filter1_, **flag) -> ConvPairPlanReport:
            """The plan of the pair conv 1 runs as (c0 input channels, filter1_), marked by `flag`."""
            rep = plan_conv_pair(images, height, width, c0, mid_channels, out_channels, filter1=filter1_,
                                 filter2=f2, activation=activation, device=device, tile=tile, policy=policy,
                                 mode=mode, optimizations=optimizations, cpu=cpu, split_k=split_k,
                                 allow_fallback=allow_fallback, dtype=dtype, residual=residual)
            return dataclasses.replace(rep, plan=dataclasses.replace(rep.plan, **flag))

        if config is not None and config.kernel == 1 and conv_unfold.needs_unfold(in_channels):
            # The Hopper conv loads a filter tap's 64 channels at a time: conv 1 runs
            # as a 1x1 conv over its input's unfolded windows.
            return transformed(conv_unfold.unfolded_channels(in_channels, f1), 1, unfold1=True)
        if config is not None and config.kernel == 2 and in_channels < PIXEL8_CHANNELS:
            # The halo conv reads an image's pixels padded to 8 channels.
            return transformed(PIXEL8_CHANNELS, f1, pixel8=True)
        if config is not None and config.kernel == 1:
            _check_sm90_conv(model, tiles, (in_channels, mid_channels, out_channels), f1, f2, split_k, run_mode)
        if config is not None and config.kernel == 2:
            _check_halo_conv(model, tiles, (in_channels, mid_channels, out_channels), f1, f2, split_k, activation)
        candidates = [(tiles[0], tiles[1], config)]
    else:
        candidates = [(c.tile, c.tile, c) for c in kernels.CONV_CUDA_CONFIGS]

    pixels = images * height * width
    best = None
    for t1, t2, config in candidates:
        kernel = config.kernel if config else 0
        # The paper's conv pairs use Conv2DTileSync: it overlaps the most, and
        # a consumer tile's halo spans few producer rows, so its waits are few.
        pol = chosen_policy or Conv2DTileSync(*f2)
        if kernel == 2:
            # The halo conv's tiles cover the padded rows (cusync/halo_tiling.h).
            positions = _cusync_cpu.halo_tile_count(images, height, width, (in_channels, mid_channels, out_channels))
            g1 = (positions, math.ceil(mid_channels / t1.n))
            g2 = (positions, math.ceil(out_channels / t2.n))
        else:
            g1, g2 = grid(pixels, mid_channels, t1), grid(pixels, out_channels, t2)
        n1, n2 = g1[0] * g1[1], g2[0] * g2[1]
        slots = model.sms * min(model.ctas_per_sm(t1), model.ctas_per_sm(t2))
        d1 = [float(t1.m * t1.n * f1[0] * f1[1] * in_channels)] * n1  # multiply-adds per tile
        d2 = [float(t2.m * t2.n * f2[0] * f2[1] * mid_channels)] * n2
        for name, s, f, c, t in (("producer", split_k[0], f1, in_channels, t1),
                                 ("consumer", split_k[1], f2, mid_channels, t2)):
            if s > conv_k_blocks(f, c, t):
                raise ValueError(f"split_k: the {name} conv has {conv_k_blocks(f, c, t)} k-blocks "
                                 f"({f[0]}x{f[1]} taps x {c} channels in blocks of {t.k}); {s} shares is more")
        plan = ConvPairPlan(t1, t2, pol, run_mode, "row_major", "row_major", optimizations,
                            kernel, cpu, split_k=split_k)
        rep = ConvPairPlanReport(
            device=model.name, images=images, height=height, width=width,
            channels=(in_channels, mid_channels, out_channels), filters=(f1, f2),
            activation=activation, tile1=t1, tile2=t2, grid1=g1, grid2=g2, tiles1=n1, tiles2=n2,
            slots=slots, waves_stream=math.ceil(n1 / slots) + math.ceil(n2 / slots),
            waves_synced=math.ceil((n1 + n2) / slots),
            makespan_stream=makespan(d1, slots) + makespan(d2, slots),
            makespan_synced=makespan(d1 + d2, slots), policy=pol, mode=run_mode, plan=plan)
        cost = rep.makespan_synced if run_mode != "serial" else rep.makespan_stream
        cost /= config.relative_rate if config else 1.0
        if best is None or cost < best[0]:
            best = (cost, rep)
    cost, rep = best
    automatic = chosen_policy is None and mode == "auto" and tiles is None and split_k == (1, 1)
    if not automatic:
        return dataclasses.replace(rep, source="user")
    fallback = lambda r, source: dataclasses.replace(r, source=source,
                                                     plan=dataclasses.replace(r.plan, fallback=True))
    if allow_fallback and not on_cpu and _dtype_name(dtype) not in (None, "float16", "bfloat16"):
        return fallback(rep, "model")  # the GPU kernels take float16 and bfloat16
    if allow_fallback and not on_cpu:
        choice = tuning.lookup_conv(model.name, images, height, width, (in_channels, mid_channels, out_channels),
                                    (f1, f2), activation, _dtype_name(dtype), residual)
        if choice is not None and choice.fallback:
            return fallback(rep, "measured")
        if choice is not None:
            rep = plan_conv_pair(images, height, width, in_channels, mid_channels, out_channels, filter1=f1,
                                 filter2=f2, activation=activation, device=model, tile=choice.tile,
                                 policy=choice.policy, mode=choice.mode, optimizations=optimizations, cpu=cpu,
                                 split_k=choice.split_k)
            return dataclasses.replace(rep, source="measured")
    # cuDNN modelled at full rate in stream order (as for the MLP).
    if allow_fallback and not on_cpu and cost > rep.makespan_stream:
        return fallback(rep, "model")
    return rep

