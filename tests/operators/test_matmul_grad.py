"""Gradients of MatMul, Gemm and FC against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((3,), (3,)),
        ((4,), (4, 2)),
        ((2, 4), (4,)),
        ((2, 3), (3, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((2, 3, 4), (4, 5)),
        ((3, 4), (2, 4, 5)),
        ((3,), (2, 3, 4)),
        ((2, 2, 3), (3,)),
    ],
)
def test_matmul_gradient(shape_a, shape_b):
    check_gradient("MatMul", [rand(*shape_a, seed=1), rand(*shape_b, seed=2)])


@pytest.mark.parametrize("wrt", [0, 1])
def test_matmul_gradient_one_input(wrt):
    check_gradient("MatMul", [rand(2, 3, 4, seed=1), rand(4, 5, seed=2)], wrt=wrt)


def test_matmul_gradient_op_skips_unwanted_outputs():
    (grad_op,) = GRADIENTS["MatMul"](op_def("MatMul", ["a", "b"], ["y"]), ["dy"], [None, "db"])
    assert grad_op.type == "MatMulGradient"
    assert list(grad_op.output) == ["", "db"]
    a, b, dy = rand(2, 3, 4), rand(4, 5, seed=1), rand(2, 3, 5, seed=2)
    (db,) = run_op("MatMulGradient", [a, b, dy], outputs=["", "db"])
    assert db.dtype == np.float32
    np.testing.assert_allclose(db, np.einsum("bmk,bmn->kn", a, dy), rtol=1e-5)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape", [None, (3, 4), (4,), (3, 1), (1,), ()])
def test_gemm_gradient(trans_a, trans_b, c_shape):
    a = rand(*((2, 3) if trans_a else (3, 2)), seed=1)
    b = rand(*((4, 2) if trans_b else (2, 4)), seed=2)
    inputs = [a, b] + ([] if c_shape is None else [rand(*c_shape, seed=3)])
    check_gradient("Gemm", inputs, alpha=0.7, beta=1.5, transA=trans_a, transB=trans_b)


def test_gemm_gradient_default_scales():
    check_gradient("Gemm", [rand(3, 2), rand(2, 4, seed=1), rand(4, seed=2)])


def test_gemm_gradient_op():
    op = op_def("Gemm", ["a", "b", "c"], ["y"], beta=2.0)
    (grad_op,) = GRADIENTS["Gemm"](op, ["dy"], [None, None, "dc"])
    assert grad_op.type == "GemmGradient" and list(grad_op.output) == ["", "", "dc"]
    dy = rand(3, 4)
    (dc,) = run_op(
        "GemmGradient", [rand(3, 2), rand(2, 4), dy, rand(4)], outputs=["", "", "dc"], beta=2.0
    )
    np.testing.assert_allclose(dc, 2.0 * dy.sum(0), rtol=1e-6)


@pytest.mark.parametrize(
    "x_shape, w_shape, axis, axis_w",
    [
        ((3, 4), (5, 4), 1, 1),
        ((2, 3, 4), (5, 12), 1, 1),
        ((2, 3, 4), (5, 4), 2, 1),
        ((2, 3, 4), (5, 2, 2), -1, 1),
        ((6,), (2, 6), 0, 1),
    ],
)
def test_fc_gradient(x_shape, w_shape, axis, axis_w):
    n = w_shape[0]
    inputs = [rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(n, seed=3)]
    check_gradient("FC", inputs, axis=axis, axis_w=axis_w)


def test_fc_gradient_op_caffe2_order():
    op = op_def("FC", ["x", "w", "b"], ["y"])
    (grad_op,) = GRADIENTS["FC"](op, ["dy"], [None, "dw", "db"])
    assert grad_op.type == "FCGradient"
    assert list(grad_op.output) == ["dw", "db", ""]
    x, w, dy = rand(3, 4), rand(5, 4, seed=1), rand(3, 5, seed=2)
    dw, db = run_op("FCGradient", [x, w, dy], outputs=["dw", "db"])
    np.testing.assert_allclose(dw, dy.T @ x, rtol=1e-5)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-5)
    assert dw.dtype == db.dtype == np.float32
