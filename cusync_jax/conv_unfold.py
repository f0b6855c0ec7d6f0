"""A first convolution over few input channels, run as a 1x1 convolution
over its unfolded windows.

The Hopper conv's k-block is one filter tap's 64 channels, so it cannot load
an image's 3 colour channels (VGG's first pair), and padded to 64 they would
fill 3 of every k-block's 64 lanes. Unfolded, each pixel's R x S window of
C0 channels becomes one vector of R*S*C0 channels (zero-padded to a multiple
of 64) and conv 1 a 1x1 convolution over it: VGG's 27 values a pixel fill
one k-block instead of nine mostly empty ones. The gather is one XLA fusion
that writes the unfolded image once; conv 2, and the synchronization, are
unchanged (a 1x1 producer tile covers the same pixels).
"""
from __future__ import annotations

import jax.numpy as jnp

from .kernels import CONV_SM90_CONFIGS

# Channels of one Hopper conv k-block (every Hopper conv tile has k = 64).
K_BLOCK_CHANNELS = CONV_SM90_CONFIGS[0].tile.k


def unfolded_channels(channels: int, filter_: tuple) -> int:
    """Channels of the unfolded image: R*S*C0 rounded up to a whole k-block."""
    k = filter_[0] * filter_[1] * channels
    return -(-k // K_BLOCK_CHANNELS) * K_BLOCK_CHANNELS


def needs_unfold(channels: int) -> bool:
    """Whether the Hopper conv can load conv 1's input only unfolded."""
    return channels % K_BLOCK_CHANNELS != 0


def unfold_first_conv(x, k1):
    """(x [N, H, W, C0], k1 [R, S, C0, C1]) -> (windows [N, H, W, Kp],
    k1 as [1, 1, Kp, C1]), Kp = unfolded_channels(C0, (R, S)), such that the
    stride-1 SAME convolution of x with k1 equals the 1x1 convolution of the
    windows with the reshaped k1.

    A window's channels are ordered (r, s, c), the order of HWIO's leading
    axes, so k1 only reshapes; the padding channels are zeros in both."""
    n, h, w, c0 = x.shape
    r, s, _, c1 = k1.shape
    kp = unfolded_channels(c0, (r, s))
    # SAME padding of a stride-1 odd filter: (R - 1) / 2 on each side.
    pr, ps = (r - 1) // 2, (s - 1) // 2
    padded = jnp.pad(x, ((0, 0), (pr, r - 1 - pr), (ps, s - 1 - ps), (0, 0)))
    taps = [padded[:, i:i + h, j:j + w, :] for i in range(r) for j in range(s)]
    extra = kp - r * s * c0
    if extra:
        taps.append(jnp.zeros((n, h, w, extra), x.dtype))
    windows = jnp.concatenate(taps, axis=-1)
    k = jnp.pad(k1.reshape(r * s * c0, c1), ((0, extra), (0, 0)))
    return windows, k.reshape(1, 1, kp, c1)
