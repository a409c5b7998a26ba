"""Det's gradient (Einsum's is in einsum.py, beside the equation parser it shares).

    Det(X) -> Y
        backward: DetGradient(X, dY) -> dX

d det(A) / dA = adj(A)^T, the transposed adjugate, which is det(A) inv(A)^T where A is
invertible but stays defined (and continuous) where A is singular. It is formed from the SVD
A = U diag(s) V^T as adj(A)^T = det(U) det(V) U diag(p) V^T with p_i = prod_{j != i} s_j,
the products taken as prefix and suffix products: nothing is inverted or divided, so a
singular A of rank M - 1 gets its (non-zero) adjugate and one of lower rank gets 0.
Computed in float64 and batched over the leading dims.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.schema import gradient, kernel, schema

schema(
    "DetGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    dtypes="float",
    onnx=False,
    doc="dX = dY * adj(X)^T (= dY * det(X) * inv(X)^T where X is invertible) for each square "
    "matrix: X (*, M, M), dY (*) -> dX like X, in dY's dtype",
)


@gradient("Det")
def det_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("DetGradient", [op.input[0], g_out[0]], [g_in[0]])]


def adjugate_transpose(a: np.ndarray) -> np.ndarray:
    """adj(A)^T of each matrix of `a` (*, M, M), float64, without inverting A (see the
    module doc)."""
    m = a.shape[-1]
    if m == 0:
        return np.zeros(a.shape)
    u, s, vh = np.linalg.svd(a.astype(np.float64, copy=False))
    ones = np.ones(s.shape[:-1] + (1,))
    before = np.concatenate([ones, np.cumprod(s[..., :-1], axis=-1)], axis=-1)
    after = np.concatenate([np.cumprod(s[..., :0:-1], axis=-1)[..., ::-1], ones], axis=-1)
    sign = np.sign(np.linalg.det(u) * np.linalg.det(vh))  # each is +1 or -1
    return sign[..., None, None] * ((u * (before * after)[..., None, :]) @ vh)


@kernel("DetGradient")
def det_gradient_cpu(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"DetGradient: input X has shape {list(x.shape)}, expected (*, M, M) (square "
            "matrices in the last two dims)"
        )
    if dy.shape != x.shape[:-2]:
        raise ShapeError(
            f"DetGradient: input dY has shape {list(dy.shape)}, expected {list(x.shape[:-2])}, "
            "the shape of Det's output"
        )
    dx = dy.astype(np.float64)[..., None, None] * adjugate_transpose(x)
    return (dx.astype(dy.dtype, copy=False),)
