"""Gradients of Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu, Selu, Softplus, HardSigmoid, Gelu."""

import numpy as np
import pytest

from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

SHAPES = [(7,), (3, 4), (2, 3, 4)]


def kinked(*shape, seed=0):
    """Values in [-2, 2) at least 0.05 away from 0, where these activations have kinks."""
    x = rand(*shape, seed=seed, low=-2.0, high=2.0)
    return np.where(np.abs(x) < 0.05, x + np.sign(x + 1e-9) * 0.1, x).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Softplus"])
def test_plain(op, shape):
    check_gradient(op, [kinked(*shape)])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [0.01, 0.3, 0.0, -0.5])
def test_leaky_relu(shape, alpha):
    check_gradient("LeakyRelu", [kinked(*shape)], alpha=alpha)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0, -0.7])
def test_elu(shape, alpha):
    check_gradient("Elu", [kinked(*shape)], alpha=alpha)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("attrs", [{}, {"alpha": 1.5, "gamma": 2.0}, {"alpha": -1.0, "gamma": 0.5},
                                   {"alpha": 1.0, "gamma": -1.0}])  # fmt: skip
def test_selu(shape, attrs):
    check_gradient("Selu", [kinked(*shape)], **attrs)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 0.2}, {"alpha": -1.0, "beta": 0.3}])
def test_hard_sigmoid(shape, attrs):
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    x = kinked(*shape) * 1.5
    v = alpha * x + beta  # keep alpha * x + beta away from the corners 0 and 1
    x = np.where((np.abs(v) < 0.05) | (np.abs(v - 1) < 0.05), x + 0.2 / alpha, x)
    check_gradient("HardSigmoid", [x.astype(np.float32)], **attrs)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(shape, approximate):
    check_gradient("Gelu", [rand(*shape, low=-4.0, high=4.0)], approximate=approximate)


def test_gelu_gradient_in_the_tails():
    x = np.array([-1e30, -40.0, 40.0, 1e30], np.float32)
    for approximate in ("none", "tanh"):
        (dx,) = run_op("GeluGradient", [x, np.ones(4, np.float32)], approximate=approximate)
        np.testing.assert_allclose(dx, [0, 0, 1, 1], atol=1e-6)
        assert dx.dtype == np.float32


@pytest.mark.parametrize(
    "x_shape, slope_shape",
    [((3, 4), (4,)), ((2, 3, 4, 5), (3, 1, 1)), ((3, 4), ()), ((5,), (5,)), ((2, 3, 5), (3,))],
)
def test_prelu(x_shape, slope_shape):
    x, slope = kinked(*x_shape), rand(*slope_shape, seed=1, low=-0.5, high=0.5)
    check_gradient("PRelu", [x, slope])


def test_prelu_gradient_respects_output_mask():
    x, slope, dy = kinked(3, 4), rand(4, seed=1), rand(3, 4, seed=2)
    (dslope,) = run_op("PReluGradient", [x, slope, dy], outputs=["", "ds"])
    np.testing.assert_allclose(dslope, np.where(x < 0, dy * x, 0).sum(0), rtol=1e-6)


@pytest.mark.parametrize(
    "op_type, grad_type",
    [("Relu", "ReluGradient"), ("Sigmoid", "SigmoidGradient"), ("Tanh", "TanhGradient"),
     ("Softplus", "SoftplusGradient"), ("HardSigmoid", "HardSigmoidGradient"),
     ("LeakyRelu", "LeakyReluGradient"), ("Elu", "EluGradient"), ("Selu", "SeluGradient"),
     ("Gelu", "GeluGradient")],
)  # fmt: skip
def test_maker_emits(op_type, grad_type):
    (grad_op,) = GRADIENTS[op_type](op_def(op_type, ["x"], ["y"]), ["dy"], ["dx"])
    assert grad_op.type == grad_type
    reads_x = op_type == "Gelu"
    assert ("x" in grad_op.input) == reads_x and GRADIENTS[op_type].inplace_safe != reads_x
    (grad_op,) = GRADIENTS["PRelu"](op_def("PRelu", ["x", "s"], ["y"]), ["dy"], ["dx", None])
    assert grad_op.type == "PReluGradient" and list(grad_op.output) == ["dx", ""]


def backprop_in_place(op_type, x, **attrs):
    net = NetDef(name="t", op=[op_def(op_type, ["x"], ["x"], **attrs)])
    grads = add_gradient_ops(net, ["x"], wrt=["x"])
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.run_net_once(net)
    return ws.fetch_blob(grads["x"])


@pytest.mark.parametrize("op_type, attrs", [("Relu", {}), ("Elu", {"alpha": 0.5}),
                                            ("LeakyRelu", {}), ("Sigmoid", {})])  # fmt: skip
def test_in_place(op_type, attrs):
    x = kinked(3, 4)
    (y,) = run_op(op_type, [x], **attrs)
    (expected,) = run_op(f"{op_type}Gradient", [y, np.ones_like(x)], **attrs)
    np.testing.assert_array_equal(backprop_in_place(op_type, x, **attrs), expected)


@pytest.mark.parametrize("op_type", ["LeakyRelu", "Elu", "Selu"])
def test_negative_alpha_in_place_is_refused(op_type):
    with pytest.raises(SchemaError, match="overwrites in place"):
        backprop_in_place(op_type, kinked(3), alpha=-0.5)


def test_gelu_in_place_is_refused():
    with pytest.raises(SchemaError, match="overwrites in place"):
        backprop_in_place("Gelu", kinked(3))
