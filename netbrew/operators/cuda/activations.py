"""CUDA kernels of the activations (activations.cu), checked against the NumPy kernels.

The template for every family: one .cu file of `extern "C"` kernels per dtype, and here
the launch code, registered with `@kernel(op, device="cuda")` on GPUArrays.
"""

from __future__ import annotations

import numpy as np

from netbrew.operators.cuda.launch import empty, grid, kernel, suffix
from netbrew.operators.schema import kernel as register

FAMILY = "activations"


@register("Relu", device="cuda")
def relu_cuda(x):
    y = empty(x.shape, x.dtype)
    fn = kernel(FAMILY, f"relu_{suffix(x.dtype, 'Relu')}")
    if x.size:  # GPUArrays as arguments: an empty one has no pointer to pass
        fn(x, y, np.int64(x.size), **grid(x.size))
    return (y,)


@register("ReluGradient", device="cuda")
def relu_gradient_cuda(y, dy):
    dx = empty(y.shape, y.dtype)
    fn = kernel(FAMILY, f"relu_grad_{suffix(y.dtype, 'ReluGradient')}")
    if y.size:
        fn(y, dy, dx, np.int64(y.size), **grid(y.size))
    return (dx,)
