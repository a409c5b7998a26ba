"""Small data sets bundled with netbrew, so the demo and tests run offline."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """The UCI 8x8 handwritten digits (see data/README.md for attribution).

    Returns:
        images: float32 [1797, 1, 8, 8], scaled to [0, 1].
        labels: int32 [1797].
    """
    with resources.files(__package__).joinpath("digits.csv.gz").open("rb") as raw:
        table = np.loadtxt(gzip.open(raw), delimiter=",", dtype=np.float32)
    images = (table[:, :64] / 16.0).reshape(-1, 1, 8, 8)
    return images, table[:, 64].astype(np.int32)
