"""Gradients of the comparison, variadic and constant ops: Equal, Less, Greater (none), Where,
Sum, Mean, Max, Min, Cast, Identity and Constant (none)."""

import numpy as np
import pytest

from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

BROADCAST = [[(3, 4)], [(3, 4), (3, 4)], [(2, 3, 4), (4,)], [(3, 1), (1, 4), (3, 4)], [(2, 3), ()]]


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "Constant"])
def test_no_gradient(op):
    assert isinstance(GRADIENTS[op], NoGradient)


@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)), ((4,), (2, 3, 4), ()),
               ((2, 1, 4), (1, 3, 1), (2, 3, 4))],
)  # fmt: skip
@pytest.mark.parametrize("wrt", [1, 2, [1, 2]])
def test_where(shapes, wrt):
    cond = rand(*shapes[0], seed=3) > 0
    check_gradient("Where", [cond, rand(*shapes[1]), rand(*shapes[2], seed=1)], wrt=wrt)


def test_where_in_place_passes_shapes_through():
    cond, x, y = np.array([True, False, True]), rand(3), rand(1, seed=1)
    net = NetDef(name="t", op=[op_def("Where", ["c", "x", "y"], ["x"])])
    grads = add_gradient_ops(net, ["x"], wrt=["x", "y"])
    ws = Workspace()
    for name, value in {"c": cond, "x": x, "y": y}.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob(grads["x"]), [1, 0, 1])
    np.testing.assert_array_equal(ws.fetch_blob(grads["y"]), [1])
    (grad_op,) = [op for op in net.op if op.type == "WhereGradient"]
    assert list(grad_op.input) == ["c", "x_grad", "x_grad", "y"]


@pytest.mark.parametrize("shapes", BROADCAST)
@pytest.mark.parametrize("op", ["Sum", "Mean"])
def test_sum_mean(op, shapes):
    check_gradient(op, [rand(*s, seed=k) for k, s in enumerate(shapes)])


def distinct(shapes, seed=0):
    """Arrays whose values are all distinct, 0.01 apart: no ties, even after broadcasting."""
    sizes = [int(np.prod(s)) for s in shapes]
    pool = np.random.default_rng(seed).permutation(sum(sizes)) * 0.01
    ends = np.cumsum(sizes)
    return [pool[e - n : e].reshape(s).astype(np.float32) for s, n, e in zip(shapes, sizes, ends)]


@pytest.mark.parametrize("shapes", BROADCAST)
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min(op, shapes):
    check_gradient(op, distinct(shapes))


@pytest.mark.parametrize("op", ["Max", "Min"])  # "MaxGradient", "MinGradient"
def test_max_min_ties_give_every_tied_input_the_gradient(op):
    a, b = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 0.0])
    (y,) = run_op(op, [a, b])
    da, db = run_op(f"{op}Gradient", [y, np.ones(3), a, b], outputs=2)
    np.testing.assert_array_equal(da, [1, 0, 1] if op == "Max" else [1, 1, 0])
    np.testing.assert_array_equal(db, [1, 1, 0] if op == "Max" else [1, 0, 1])


def test_variadic_makers_skip_unwanted_inputs():
    fwd = op_def("Mean", ["a", "b", "c"], ["y"])
    (grad_op,) = GRADIENTS["Mean"](fwd, ["dy"], [None, "db", None])
    assert grad_op.type == "MeanGradient"
    assert list(grad_op.input) == ["dy", "", "b", ""] and list(grad_op.output) == ["", "db", ""]
    (db,) = run_op(
        "MeanGradient", [np.ones((2, 3)), None, np.zeros(3), None], outputs=["", "d", ""]
    )
    np.testing.assert_allclose(db, np.full(3, 2 / 3))
    (grad_op,) = GRADIENTS["Max"](op_def("Max", ["a", "b"], ["y"]), ["dy"], ["da", None])
    assert grad_op.type == "MaxGradient" and list(grad_op.input) == ["y", "dy", "a", ""]
    grad_ops = GRADIENTS["Sum"](op_def("Sum", ["a", "b"], ["y"]), ["dy"], [None, "db"])
    assert [o.type for o in grad_ops] == ["SumReduceLike"]


@pytest.mark.parametrize("to", ["DOUBLE", "DOUBLE"])
@pytest.mark.parametrize("shape", [(5,), (3, 4)])
def test_cast(shape, to):
    check_gradient("Cast", [rand(*shape)], to=to)


@pytest.mark.parametrize("to", ["FLOAT", "DOUBLE", "FLOAT16"])
def test_cast_gradient_is_cast_back_to_the_input_dtype(to):
    x = rand(3, 4)
    (grad_op,) = GRADIENTS["Cast"](op_def("Cast", ["x"], ["y"], to=to), ["dy"], ["dx"])
    assert grad_op.type == "CastGradient" and list(grad_op.input) == ["x", "dy"]
    (y,) = run_op("Cast", [x], to=to)
    (dx,) = run_op("CastGradient", [x, np.ones_like(y)])
    assert dx.dtype == np.float32 and dx.shape == x.shape and np.all(dx == 1)


def test_cast_from_or_to_integers_passes_no_gradient():
    (grad_op,) = GRADIENTS["Cast"](op_def("Cast", ["x"], ["y"], to="INT64"), ["dy"], ["dx"])
    assert list(grad_op.input) == ["x", ""]  # an integer output carries no gradient to read
    (dx,) = run_op("CastGradient", [rand(3), None])
    assert dx.dtype == np.float32 and np.all(dx == 0)
    labels = np.array([1, 2, 3], np.int64)
    (dx,) = run_op("CastGradient", [labels, np.ones(3, np.float32)])
    assert dx.dtype == np.int64 and np.all(dx == 0)


@pytest.mark.parametrize("shape", [(5,), (2, 3)])
def test_identity(shape):
    check_gradient("Identity", [rand(*shape)])
    (grad_op,) = GRADIENTS["Identity"](op_def("Identity", ["x"], ["x"]), ["dx"], ["dx"])
    assert grad_op.type == "Identity" and GRADIENTS["Identity"].inplace_safe
