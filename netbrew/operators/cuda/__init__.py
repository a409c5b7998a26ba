"""CUDA kernels, one module per op family beside its .cu source (DESIGN §6).

Importing them registers the kernels under device "cuda"; PyCUDA itself is imported only
when a kernel first runs, so a CPU-only install loads this package without it.
"""

from netbrew.operators.cuda import (  # noqa: F401  (imported to register their kernels)
    activations,
    conv,
    counters,
    elementwise,
    elementwise_binary,
    elementwise_cast,
    fillers,
    fused,
    gather,
    gemm,
    losses,
    lrn,
    normalization,
    optim,
    pool,
    reduce,
    shape_ops,
    softmax,
)
