"""Gradients of Add, Sub, Mul, Div, Pow, Neg, Abs, Exp, Log, Sqrt, Reciprocal and Clip."""

import numpy as np
import pytest

from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

SHAPES = [
    ((3, 4), (3, 4)),
    ((2, 3, 4), (4,)),
    ((3, 1), (1, 5)),
    ((2, 3), ()),
    ((1, 3, 1), (2, 1, 4)),
]


def away_from_zero(*shape, seed=0, low=0.2, high=1.5):
    """Values with |x| in [low, high) and random signs."""
    x = rand(*shape, seed=seed, low=low, high=high)
    return x * np.where(rand(*shape, seed=seed + 7) < 0, -1, 1).astype(x.dtype)


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_add_sub_mul(op, shapes):
    check_gradient(op, [rand(*shapes[0]), rand(*shapes[1], seed=1)])


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("wrt", [0, 1, [0, 1]])
def test_div(shapes, wrt):
    a, b = rand(*shapes[0]), away_from_zero(*shapes[1], seed=1, low=0.5)
    check_gradient("Div", [a, b], wrt=wrt)


@pytest.mark.parametrize("shapes", SHAPES)
def test_pow_positive_base(shapes):
    x, y = rand(*shapes[0], low=0.5, high=2.0), rand(*shapes[1], seed=1, low=-2.0, high=2.0)
    check_gradient("Pow", [x, y])


@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0])
def test_pow_negative_base_integral_exponent(exponent):
    x = rand(3, 4, low=-2.0, high=-0.5)
    check_gradient("Pow", [x, np.array(exponent, np.float32)], wrt=0)


def test_pow_gradient_edge_cases():
    """0 where Y == 0 (dX) or X == 0 and Y >= 0 (dY); an integer exponent gets zeros."""
    x = np.array([0.0, 0.0, 2.0, -1.0], np.float32)
    y = np.array([0.0, 2.0, 0.0, 2.0], np.float32)
    z = x**y
    dx, dy = run_op("PowGradient", [x, y, z, np.ones(4, np.float32)], outputs=2)
    np.testing.assert_allclose(dx, [0.0, 0.0, 0.0, -2.0])
    np.testing.assert_allclose(dy[:3], [0.0, 0.0, np.log(2)], rtol=1e-6)
    assert np.isnan(dy[3])  # log of a negative base
    _, dy = run_op("PowGradient", [x, np.int64(2), z, np.ones(4, np.float32)], outputs=2)
    assert dy.dtype == np.int64 and dy == 0


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("op", ["Neg", "Abs", "Exp", "Reciprocal"])
def test_unary(op, shape):
    check_gradient(op, [away_from_zero(*shape)])


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("op", ["Log", "Sqrt"])
def test_unary_positive(op, shape):
    check_gradient(op, [rand(*shape, low=0.3, high=3.0)])


def test_abs_gradient_is_zero_at_zero():
    (dx,) = run_op("AbsGradient", [np.array([-2.0, 0.0, 3.0]), np.array([5.0, 5.0, 5.0])])
    np.testing.assert_array_equal(dx, [-5.0, 0.0, 5.0])


def test_sqrt_and_reciprocal_gradient_ops():
    y, dy = np.array([0.5, 2.0], np.float32), np.array([1.0, 3.0], np.float32)
    (dx,) = run_op("SqrtGradient", [y, dy])
    np.testing.assert_allclose(dx, [1.0, 0.75])
    (dx,) = run_op("ReciprocalGradient", [y, dy])
    np.testing.assert_allclose(dx, [-0.25, -12.0])
    assert dx.dtype == np.float32


def clip_input(*shape):
    """Values in [-1, 1) kept 0.05 away from the bounds +-0.5."""
    x = rand(*shape)
    return np.where(np.abs(np.abs(x) - 0.5) < 0.05, x * 0.5, x).astype(np.float32)


@pytest.mark.parametrize("shape", [(7,), (3, 4)])
@pytest.mark.parametrize("bounds", [(-0.5, 0.5), (-0.5, None), (None, 0.5), (None, None)])
def test_clip(shape, bounds):
    low, high = (None if b is None else np.array(b, np.float32) for b in bounds)
    check_gradient("Clip", [clip_input(*shape), low, high], wrt=0)


def test_clip_gradient_bounds_are_inclusive():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], np.float32)
    lo, hi = np.float32(-0.5), np.float32(0.5)
    (dx,) = run_op("ClipGradient", [x, np.ones(5, np.float32), lo, hi])
    np.testing.assert_array_equal(dx, [0, 1, 1, 1, 0])


def test_clip_gives_bounds_no_gradient():
    ops = GRADIENTS["Clip"](op_def("Clip", ["x", "lo", "hi"], ["y"]), ["dy"], ["dx", "dl", "dh"])
    assert [(o.type, list(o.output)) for o in ops] == [("ClipGradient", ["dx"])]


@pytest.mark.parametrize(
    "op_type, n_in, grad_type",
    [
        ("Pow", 2, "PowGradient"),
        ("Abs", 1, "AbsGradient"),
        ("Sqrt", 1, "SqrtGradient"),
        ("Reciprocal", 1, "ReciprocalGradient"),
        ("Clip", 3, "ClipGradient"),
        ("Add", 2, "SumReduceLike"),
        ("Exp", 1, "Mul"),
    ],
)
def test_maker_emits(op_type, n_in, grad_type):
    fwd = op_def(op_type, [f"x{i}" for i in range(n_in)], ["y"])
    ops = GRADIENTS[op_type](fwd, ["y_grad"], [f"x{i}_grad" for i in range(n_in)])
    assert grad_type in [o.type for o in ops]


def backprop(ops, feeds, wrt):
    """Runs ops plus their gradient ops for loss = sum of the last output; returns the grads."""
    net = NetDef(name="t", op=ops)
    grads = add_gradient_ops(net, [ops[-1].output[0]], wrt=wrt)
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    return [ws.fetch_blob(grads[w]) for w in wrt]


@pytest.mark.parametrize("op", ["Add", "Sub", "Div"])
def test_in_place_with_broadcast_second_input(op):
    a, b = rand(3, 4), away_from_zero(4, seed=1, low=0.5)
    da, db = backprop([op_def(op, ["a", "b"], ["a"])], {"a": a, "b": b}, ["a", "b"])
    y = {"Add": a + b, "Sub": a - b, "Div": a / b}[op]
    expected_db = {"Add": 3 * np.ones(4), "Sub": -3 * np.ones(4), "Div": (-y / b).sum(0)}[op]
    np.testing.assert_allclose(da, np.ones((3, 4)) if op != "Div" else 1 / b + 0 * a, rtol=1e-6)
    np.testing.assert_allclose(db, expected_db, rtol=1e-5)
    assert da.shape == (3, 4) and db.shape == (4,)


def test_in_place_ops_that_read_their_input_are_refused():
    with pytest.raises(SchemaError, match="overwrites in place"):
        backprop([op_def("Mul", ["a", "b"], ["a"])], {}, ["a"])
    with pytest.raises(SchemaError, match="overwrites in place"):
        backprop([op_def("Div", ["a", "a"], ["a"])], {}, ["a"])
