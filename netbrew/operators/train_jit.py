"""numba kernels for the optimizer's per-parameter passes: WeightedSum and MomentumSGDUpdate
(DESIGN §8).

A training step runs these once per parameter tensor (weight decay as a WeightedSum of the
gradient and the parameter, then the momentum update), over every parameter: ResNet-18's 11M
values each step. NumPy evaluates each expression a ufunc at a time, each writing a
temporary as large as the parameter, so one update makes about ten passes over memory;
these loops make one, reading each input once and writing each output once, parallel over
the cores. The arithmetic is NumPy's, operation by operation in the same order and dtype
(no fused multiply-adds), so the results are bit-identical; train.py's NumPy kernels stay
as the fallback and as the tests' oracle. Inside ResNet-18's training step (batch 32, 2
threads): WeightedSum and MomentumSGDUpdate took 79 and 60 ms a step on NumPy's path.
"""

from __future__ import annotations

import numpy as np

from netbrew import jit

PARALLEL_MIN_ELEMENTS = 1 << 16
"""Values below which a pass runs on one thread."""


def applies(*arrays: np.ndarray) -> bool:
    """Whether the kernels take these arrays: the JIT is on, and all have one float32 or
    float64 dtype. (Inputs in another layout, such as a conv's weight gradient laid out
    (kh, kw, C, M) in memory, are copied to C order first: one pass, where NumPy's
    expressions would make several.)"""
    dtype = arrays[0].dtype
    return jit.enabled() and dtype in jit.FLOATS and all(a.dtype == dtype for a in arrays)


def _flat(x: np.ndarray) -> np.ndarray:
    """x's values, C-ordered, as one row (no copy where x is C-ordered)."""
    return np.ascontiguousarray(x).reshape(-1)


def weighted_sum(xs: list[np.ndarray], weights: list[float]) -> np.ndarray:
    """0 + w0 x0 + w1 x1 + ..., summed left to right as train.weighted_sum_cpu does: one
    pass for two pairs, one more for each further pair."""
    x0 = _flat(xs[0])
    dtype = x0.dtype.type
    y = np.empty(xs[0].shape, x0.dtype)
    flat = y.reshape(-1)
    pick = _pair.pick(x0.size, PARALLEL_MIN_ELEMENTS)
    if len(xs) == 1:
        pick(flat, x0, dtype(weights[0]), x0, dtype(0), False, dtype(0))
        return y
    pick(flat, x0, dtype(weights[0]), _flat(xs[1]), dtype(weights[1]), True, dtype(0))
    for x, w in zip(xs[2:], weights[2:]):
        _accumulate.pick(x0.size, PARALLEL_MIN_ELEMENTS)(flat, _flat(x), dtype(w))
    return y


@jit.kernel
def _pair(y, x0, w0, x1, w1, both, zero):
    """y = (zero + w0 x0) + w1 x1, or zero + w0 x0 alone (zero: a 0 of y's dtype, so a
    -0.0 product sums to +0.0 as in NumPy's zero-filled start)."""
    for i in jit.prange(y.size):
        v = zero + w0 * x0[i]
        if both:
            v += w1 * x1[i]
        y[i] = v


@jit.kernel
def _accumulate(y, x, w):
    """y += w x."""
    for i in jit.prange(y.size):
        y[i] += w * x[i]


def momentum_sgd_update(
    grad: np.ndarray,
    moment: np.ndarray,
    lr: float,
    param: np.ndarray,
    momentum: float,
    nesterov: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step, moment', param') of MomentumSGDUpdate in one pass, as
    train.momentum_sgd_update_cpu computes them."""
    dtype = grad.dtype.type
    step, m_new, p_new = (np.empty(grad.shape, grad.dtype) for _ in range(3))
    mom = dtype(momentum)
    kernel = _momentum.pick(grad.size, PARALLEL_MIN_ELEMENTS)
    kernel(
        _flat(grad),
        _flat(moment),
        _flat(param),
        dtype(lr),
        mom,
        dtype(1 + mom),
        bool(nesterov),
        step.reshape(-1),
        m_new.reshape(-1),
        p_new.reshape(-1),
    )
    return step, m_new, p_new


@jit.kernel
def _momentum(grad, moment, param, lr, mom, one_plus_mom, nesterov, step, m_new, p_new):
    """m' = mom m + lr g; step = (1 + mom) m' - mom m with Nesterov, else m'; p' = p - step."""
    for i in jit.prange(grad.size):
        m = moment[i]
        v = mom * m + lr * grad[i]
        s = one_plus_mom * v - mom * m if nesterov else v
        step[i] = s
        m_new[i] = v
        p_new[i] = param[i] - s
