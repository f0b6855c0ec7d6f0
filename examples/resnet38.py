"""ResNet-38 inference with cuSync-synced conv pairs.

The network of the paper's Table (ResNet-38): a stem, then four stages of
residual blocks whose two 3x3 convolutions keep the image size and channels
(56x56x64 x 3 blocks, 28x28x128 x 4, 14x14x256 x 6, 7x7x512 x 3), a stride-2
1x1 projection between stages, global pooling and a classifier. Inference
only: BatchNorm is folded into each conv's bias, so a block is

    x -> relu(conv2(relu(conv1(x) + b1)) + b2 + x)

In the synced network each block's two convs and its last ReLU are one
``cusync_jax.flax.SyncedConvPair`` (residual included); in the plain network
they are two ``nn.Conv`` with the same names (``Conv_0``, ``Conv_1``), so both
run on the same parameters.

    python examples/resnet38.py                      # CPU: small; GPU: paper sizes
    python examples/resnet38.py --batch 1 8 32 --dtype float16
"""
from __future__ import annotations

import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

import cusync_jax as cs
import cusync_jax.flax as csflax
from example_timing import DTYPES, compare, model_parser


@dataclasses.dataclass(frozen=True)
class NetSize:
    image: int                # input height and width
    channels: tuple           # per stage
    blocks: tuple             # residual blocks (conv pairs) per stage
    classes: int = 1000


PAPER = NetSize(image=224, channels=(64, 128, 256, 512), blocks=(3, 4, 6, 3))
SMALL = NetSize(image=32, channels=(8, 16, 32, 64), blocks=(3, 4, 6, 3), classes=10)


class PlainConvPair(nn.Module):
    """The block's two convolutions without cuSync (same parameter names)."""

    features: int
    dtype: object = None

    @nn.compact
    def __call__(self, x, residual):
        h = nn.relu(nn.Conv(self.features, (3, 3), padding="SAME", dtype=self.dtype)(x))
        return nn.Conv(self.features, (3, 3), padding="SAME", dtype=self.dtype)(h) + residual


class ResNet38(nn.Module):
    size: NetSize
    synced: bool
    dtype: object = jnp.float32

    @nn.compact
    def __call__(self, images):
        s = self.size
        x = nn.Conv(s.channels[0], (7, 7), strides=2, padding="SAME", dtype=self.dtype,
                    name="stem")(images)
        x = nn.max_pool(nn.relu(x), (3, 3), strides=(2, 2), padding="SAME")
        for stage, (channels, blocks) in enumerate(zip(s.channels, s.blocks)):
            if stage:
                x = nn.relu(nn.Conv(channels, (1, 1), strides=2, dtype=self.dtype,
                                    name=f"down{stage}")(x))
            for block in range(blocks):
                name = f"stage{stage}_block{block}"
                if self.synced:
                    # The block's last ReLU in the pair: the halo conv applies it in its epilogue.
                    x = csflax.SyncedConvPair(channels, activation="relu", out_activation="relu",
                                              dtype=self.dtype, name=name)(x, residual=x)
                else:
                    x = nn.relu(PlainConvPair(channels, dtype=self.dtype, name=name)(x, residual=x))
        return nn.Dense(s.classes, dtype=self.dtype, name="head")(jnp.mean(x, axis=(1, 2)))


def init_params(size: NetSize, batch: int, dtype, seed: int = 0):
    """Parameters (in dtype) and a batch of images, shared by both networks.

    Kernels are drawn with numpy, scaled by 1/sqrt(fan-in) (XLA's CPU compile
    of rank-4 random draws is slow); biases stand for folded BatchNorm shifts.
    """
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch, size.image, size.image, 3), np.float32)
    shapes = jax.eval_shape(ResNet38(size, synced=False).init, jax.random.key(0), images[:1])

    def draw(path, leaf):
        scale = (1 / np.sqrt(np.prod(leaf.shape[:-1])) if path[-1].key == "kernel" else 0.1)
        return jnp.asarray(rng.standard_normal(leaf.shape, np.float32) * scale, dtype)

    return jax.tree_util.tree_map_with_path(draw, shapes), jnp.asarray(images, dtype)


def pair_choices(size: NetSize, batch: int, dtype) -> str:
    """What policy="auto" runs for each stage's conv pairs on this device: our
    kernels or XLA's convolutions, and whether a measurement (the tuned table)
    or the wave model decided."""
    device = jax.devices()[0]
    model = cs.planner.device_model(device) if device.platform == "gpu" else "cpu"
    side = math.ceil(math.ceil(size.image / 2) / 2)  # after the stride-2 stem and max pool
    out = []
    for stage, channels in enumerate(size.channels):
        side = math.ceil(side / 2) if stage else side
        rep = cs.plan_conv_pair(batch, side, side, channels, channels, device=model, dtype=dtype)
        out.append(f"{side}x{side}x{channels} {'XLA' if rep.fallback else 'synced'} ({rep.source})")
    return ", ".join(out)


def main(argv=None):
    on_gpu = jax.default_backend() == "gpu"
    ap = model_parser(__doc__, on_gpu)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32] if on_gpu else [1, 4])
    args = ap.parse_args(argv)

    size, dtype = (PAPER if args.size == "paper" else SMALL), DTYPES[args.dtype]
    plain = jax.jit(ResNet38(size, synced=False, dtype=dtype).apply)
    synced = jax.jit(ResNet38(size, synced=True, dtype=dtype).apply)
    print(f"device {jax.devices()[0].device_kind}, {size}, {args.dtype}")
    print(f"{'batch':>6}{'plain ms':>11}{'synced ms':>11}{'speedup':>9}{'max rel err':>13}")
    choices = []
    for batch in args.batch:
        params, images = init_params(size, batch, dtype)
        t_plain, t_synced, err = compare(plain, synced, params, images, reps=args.reps)
        print(f"{batch:>6}{t_plain:>11.3f}{t_synced:>11.3f}{t_plain / t_synced:>9.3f}{err:>13.2e}")
        choices.append(f"batch {batch}: {pair_choices(size, batch, dtype)}")
    print("conv pairs (auto):\n  " + "\n  ".join(choices))


if __name__ == "__main__":
    main()
