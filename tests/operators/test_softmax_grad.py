"""Gradients of Softmax and LogSoftmax along any axis."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

CASES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -3), ((2, 1, 3), 1)]


@pytest.mark.parametrize("shape, axis", CASES)
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(op, shape, axis):
    check_gradient(op, [rand(*shape, low=-3.0, high=3.0)], axis=axis)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_gradient_op_and_axis_are_passed(op):
    (grad_op,) = GRADIENTS[op](op_def(op, ["x"], ["y"], axis=1), ["dy"], ["dx"])
    assert grad_op.type == f"{op}Gradient" and list(grad_op.input) == ["y", "dy"]
    assert [(a.name, a.i) for a in grad_op.arg] == [("axis", 1)]


def test_gradient_ops_keep_dtype_and_check_axis():
    y, dy = rand(2, 3), rand(2, 3, seed=1)
    (dx,) = run_op("SoftmaxGradient", [y, dy], axis=0)
    np.testing.assert_allclose(dx, y * (dy - (dy * y).sum(0, keepdims=True)), rtol=1e-6)
    (dx,) = run_op("LogSoftmaxGradient", [y, dy])
    np.testing.assert_allclose(dx, dy - np.exp(y) * dy.sum(1, keepdims=True), rtol=1e-6)
    assert dx.dtype == np.float32
    with pytest.raises(OperatorError, match="argument 'axis' is 2, out of range for input 'Y'"):
        run_op("SoftmaxGradient", [y, dy], axis=2)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_in_place(op):
    x = rand(3, 4)
    net = NetDef(name="t", op=[op_def(op, ["x"], ["x"]), op_def("Mul", ["x", "w"], ["loss"])])
    grads = add_gradient_ops(net, ["loss"], wrt=["x"])
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("w", rand(3, 4, seed=1))
    ws.run_net_once(net)
    (y,) = run_op(op, [x])
    (expected,) = run_op(f"{op}Gradient", [y, rand(3, 4, seed=1)])
    np.testing.assert_allclose(ws.fetch_blob(grads["x"]), expected, rtol=1e-6)
