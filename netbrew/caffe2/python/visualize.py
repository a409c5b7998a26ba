"""caffe2.python.visualize on netbrew: image grids of NCHW or NHWC batches (matplotlib)."""

from __future__ import annotations

from typing import Any

import numpy as np


def tile(images: np.ndarray, ncols: int | None = None) -> np.ndarray:
    """Images (N, H, W) or (N, H, W, C) as one grid image, ncols wide (default square-ish),
    each scaled to [0, 1]."""
    images = np.asarray(images, np.float64)
    n = len(images)
    ncols = ncols or int(np.ceil(np.sqrt(n)))
    nrows = int(np.ceil(n / ncols))
    low = images.reshape(n, -1).min(1).reshape(-1, *[1] * (images.ndim - 1))
    span = np.ptp(images.reshape(n, -1), 1).reshape(low.shape)
    images = (images - low) / np.where(span > 0, span, 1)
    h, w = images.shape[1:3]
    grid = np.ones((nrows * (h + 1) - 1, ncols * (w + 1) - 1, *images.shape[3:]))
    for k, image in enumerate(images):
        r, c = divmod(k, ncols)
        grid[r * (h + 1) : r * (h + 1) + h, c * (w + 1) : c * (w + 1) + w] = image
    return grid


class _Layout:
    def __init__(self, channel_axis: int) -> None:
        self.channel_axis = channel_axis

    def ShowMultiple(self, data: np.ndarray, ncols: int | None = None, ax: Any = None):  # noqa: N802
        """Draws the batch as a grid with matplotlib; returns the Axes."""
        images = np.moveaxis(np.asarray(data), self.channel_axis, -1)
        if images.shape[-1] == 1:
            images = images[..., 0]
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("visualize needs matplotlib: pip install matplotlib") from None
        ax = ax or plt.gca()
        ax.imshow(tile(images, ncols), cmap="gray" if images.ndim == 3 else None)
        ax.axis("off")
        return ax


NCHW = ChannelFirst = _Layout(1)
NHWC = ChannelLast = _Layout(-1)
