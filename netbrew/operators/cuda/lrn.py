"""CUDA LRN (lrn.cu): one thread per element sums the squares over its channel window,
in float32; checked against normalization_extra's NumPy kernel."""

from __future__ import annotations

import numpy as np

from netbrew.operators.cuda.launch import empty, grid, kernel, suffix
from netbrew.operators.normalization_extra import lrn_reach
from netbrew.operators.schema import kernel as register


@register("LRN", device="cuda")
def lrn_cuda(x, *, alpha, beta, bias, size):
    before, after = lrn_reach("LRN", x, size)
    y = empty(x.shape, x.dtype)
    if x.size:
        spatial = int(np.prod(x.shape[2:], dtype=np.int64))
        fn = kernel("lrn", f"lrn_{suffix(x.dtype, 'LRN')}")
        fn(x, y, np.int64(x.size), np.int64(x.shape[1]), np.int64(spatial), np.int32(before),
           np.int32(after), np.float32(alpha / size), np.float32(beta), np.float32(bias),
           **grid(x.size))  # fmt: skip
    return (y,)
