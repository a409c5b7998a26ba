"""Relu at memory speed: `np.maximum` against a zero array, not the scalar 0.

NumPy 2.x runs `np.maximum(x, 0)` through a slow scalar-operand loop (measured 3.7x the
time of `np.maximum(x, zeros)` on 256 x 3136 float32). `zeros_like_shared` hands out
read-only zero arrays backed by one anonymous, never-written mapping: every page of it is
the kernel's shared zero page, so it costs no memory and its reads hit the cache. Results
are bit-identical to `np.maximum(x, 0)`: the same ufunc, the same operands' values.
"""

from __future__ import annotations

import math
import mmap
import threading

import numpy as np

_LOCK = threading.Lock()
_ZERO_BYTES: list[np.ndarray] = [np.zeros(0, np.uint8)]


def zeros_like_shared(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A read-only all-zero array of `shape` and `dtype` (a view of the shared zero map)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    pool = _ZERO_BYTES[0]
    if pool.size < nbytes:
        with _LOCK:
            pool = _ZERO_BYTES[0]
            if pool.size < nbytes:
                size = max(nbytes, 2 * pool.size, 1 << 20)
                pool = np.frombuffer(mmap.mmap(-1, size, prot=mmap.PROT_READ), np.uint8)
                _ZERO_BYTES[0] = pool
    return pool[:nbytes].view(dtype).reshape(shape)


def zeros_in_layout(x: np.ndarray) -> np.ndarray:
    """A shared zero array shaped like `x` and laid out like it: when `x` is a transposed
    contiguous array (a channels-last conv output), the zeros are transposed the same way,
    so a ufunc over both walks memory in one order (mixed layouts cost 5x)."""
    if x.flags.c_contiguous or x.ndim < 2:
        return zeros_like_shared(x.shape, x.dtype)
    order = memory_order(x)
    zeros = zeros_like_shared(tuple(x.shape[a] for a in order), x.dtype)
    return zeros.transpose(np.argsort(order))


def memory_order(x: np.ndarray) -> list[int]:
    """x's axes from the one that steps furthest in memory to the nearest: an array of
    x's shape permuted into this order, made C-contiguous and transposed back by
    np.argsort(order), is laid out like x."""
    return sorted(range(x.ndim), key=lambda a: -x.strides[a])


def relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """max(x, 0) elementwise (NaN stays NaN), into `out` when given."""
    if x.dtype.kind not in "fi":  # unsigned, bool, extension types: as NumPy does
        return np.maximum(x, 0, out=out)
    return np.maximum(x, zeros_in_layout(x), out=out)
