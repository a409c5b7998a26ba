"""numba kernel for ReluGradient (DESIGN §8): dX = dY where Y > 0, else 0, in one pass.

np.where(Y > 0, dY, 0) builds a boolean mask and then selects through it at about 4 ns a
value (8 ms on ResNet-18's 64x32x32 activations at batch 32, 2M values); this loop reads Y
and dY once and writes dX once, vectorised (a select per lane), parallel over the cores:
the same values, NaNs and signed zeros included. activations_grad.relu_gradient_cpu stays
the fallback and the tests' oracle.
"""

from __future__ import annotations

import numpy as np

from netbrew import jit

PARALLEL_MIN_ELEMENTS = 1 << 16
"""Values below which the pass runs on one thread."""


def relu_gradient(y: np.ndarray, dy: np.ndarray) -> np.ndarray | None:
    """dY where Y > 0, else 0; None where the NumPy kernel must run (JIT off, other dtypes,
    shapes that differ, inputs not both C-ordered)."""
    if not (
        jit.enabled()
        and dy.dtype in jit.FLOATS
        and y.dtype == dy.dtype
        and y.shape == dy.shape
        and y.flags.c_contiguous
        and dy.flags.c_contiguous
    ):
        return None
    dx = np.empty_like(dy)
    kernel = _relu_gradient.pick(dy.size, PARALLEL_MIN_ELEMENTS)
    kernel(y.reshape(-1), dy.reshape(-1), dx.reshape(-1), dy.dtype.type(0))
    return dx


@jit.kernel
def _relu_gradient(y, dy, dx, zero):
    """dx[i] = dy[i] where y[i] > 0, else +0."""
    for i in jit.prange(dx.size):
        dx[i] = dy[i] if y[i] > 0 else zero
