"""MatMul, Gemm and FC against NumPy references written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def ref_matmul(a, b):
    # 1-D operands are promoted the way numpy documents it, then the added dims dropped.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    y = np.einsum("...mk,...kn->...mn", a2, b2)
    if a.ndim == 1:
        y = y[..., 0, :]
    if b.ndim == 1:
        y = y[..., 0]
    return (np.asarray(y, dtype=a.dtype),)


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((3,), (3,)), ((4,), (4, 2)), ((2, 4), (4,)), ((2, 3), (3, 5)), ((2, 1, 3, 4), (5, 4, 2))],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_matmul(shape_a, shape_b, dtype):
    a = rand(*shape_a, seed=1, low=-5, high=5).astype(dtype)
    b = rand(*shape_b, seed=2, low=-5, high=5).astype(dtype)
    check_op("MatMul", [a, b], reference=ref_matmul)


def ref_gemm(a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    a = a.T if transA else a
    b = b.T if transB else b
    y = alpha * (a @ b)
    if c is not None:
        y = y + beta * c
    return (y.astype(a.dtype),)


@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
@pytest.mark.parametrize(
    "attrs",
    [{}, {"transA": 1}, {"transB": 1}, {"alpha": 0.5, "beta": 2.0, "transA": 1, "transB": 1}],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm(c_shape, attrs, dtype):
    a = rand(*((4, 3) if attrs.get("transA") else (3, 4)), dtype=dtype, seed=1)
    b = rand(*((5, 4) if attrs.get("transB") else (4, 5)), dtype=dtype, seed=2)
    c = None if c_shape is None else rand(*c_shape, dtype=dtype, seed=3)
    check_op("Gemm", [a, b, c], reference=lambda a, b, c: ref_gemm(a, b, c, **attrs), **attrs)


def ref_fc(x, w, b, axis=1, axis_w=1):
    axis = axis + x.ndim if axis < 0 else axis
    lead = x.shape[:axis]
    x2 = x.reshape(int(np.prod(lead)), -1)
    w2 = w.reshape(int(np.prod(w.shape[:axis_w])), -1)
    return ((x2 @ w2.T + b).reshape(*lead, w2.shape[0]),)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((2, 3), (4, 3), {}),
        ((2, 3, 4), (5, 12), {}),
        ((2, 3, 4), (5, 3, 4), {"axis_w": 1}),
        ((2, 3, 4), (5, 4), {"axis": 2}),
        ((2, 3, 4), (5, 4), {"axis": -1}),
        ((6, 2, 2), (2, 5, 4), {"axis": 1, "axis_w": 2}),
    ],
)
def test_fc(x_shape, w_shape, attrs):
    x, w = rand(*x_shape, seed=1), rand(*w_shape, seed=2)
    n = int(np.prod(w_shape[: attrs.get("axis_w", 1)]))
    b = rand(n, seed=3)
    check_op("FC", [x, w, b], reference=lambda x, w, b: ref_fc(x, w, b, **attrs), **attrs)


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("MatMul", [rand(2, 3), rand(4, 2)], {}, "inner dims differ"),
        ("MatMul", [rand(2, 3, 4), rand(3, 4, 2)], {}, "batch dims .* do not broadcast"),
        ("MatMul", [rand(2, 3), rand(3, 2, dtype=np.float64)], {}, "input B has dtype float64"),
        ("Gemm", [rand(2, 3, 1), rand(3, 2)], {}, "input A has 3 dims, expected 2"),
        ("Gemm", [rand(2, 3), rand(2, 3)], {}, "inner dims 3 and 2 differ"),
        ("Gemm", [rand(2, 3), rand(3, 2), rand(3)], {}, r"input C has shape \[3\]"),
        ("FC", [rand(2, 3), rand(4, 5), rand(4)], {}, "has K=3.*has K=5"),
        ("FC", [rand(2, 3), rand(4, 3), rand(5)], {}, "input b has 5 elements, expected N=4"),
        ("FC", [rand(2, 3), rand(4, 3), rand(4)], {"axis": 3}, "axis=3 is out of range"),
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        run_op(op, inputs, **attrs)
