"""Gradients of Optional and OptionalGetElement: the gradient passes through unchanged."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand
from tests.operators.net_gradcheck import check_net_gradient, graph


def f64(*shape, seed=0):
    return rand(*shape, dtype=np.float64, seed=seed)


@pytest.mark.parametrize("op_type", ["Optional", "OptionalGetElement"])
def test_check_gradient_of_a_full_optional(op_type):
    check_gradient(op_type, [rand(2, 3)])


def test_tensor_through_an_optional_round_trip():
    ops = [
        op_def("Optional", ["x"], ["opt"]),
        op_def("OptionalGetElement", ["opt"], ["y"]),
        op_def("Mul", ["y", "w"], ["yw"]),
        op_def("Mul", ["yw", "x"], ["z"]),
        op_def("ReduceSum", ["z"], ["loss"], keepdims=0),
    ]
    x, w = f64(3, 2), f64(3, 2, seed=1)
    got = check_net_gradient(ops, {"x": x, "w": w}, ["x", "w"])
    np.testing.assert_allclose(got["x"], 2 * x * w)


def test_sequence_inside_an_optional_and_an_if_returning_optionals():
    # If(c) yields Optional(split(x)) or Optional(split(x * x)); the loss reads its element
    then = graph([op_def("Optional", ["S"], ["o"])], [], ["o"])
    sq = graph(
        [
            op_def("Mul", ["x", "x"], ["xx"]),
            op_def("SplitToSequence", ["xx"], ["T"], axis=0),
            op_def("Optional", ["T"], ["o"]),
        ],
        [],
        ["o"],
    )
    ops = [
        op_def("SplitToSequence", ["x"], ["S"], axis=0),
        op_def("If", ["c"], ["opt"], then_branch=then, else_branch=sq),
        op_def("OptionalGetElement", ["opt"], ["seq"]),
        op_def("ConcatFromSequence", ["seq"], ["y"], axis=0),
        op_def("Mul", ["y", "w"], ["yw"]),
        op_def("ReduceSum", ["yw"], ["loss"], keepdims=0),
    ]
    x, w = f64(3, 2), f64(3, 2, seed=1)
    for c in (True, False):
        got = check_net_gradient(ops, {"c": np.array(c), "x": x, "w": w}, ["x", "w"])
        np.testing.assert_allclose(got["x"], w if c else 2 * x * w)


def test_empty_optional_has_nothing_to_differentiate():
    assert GRADIENTS["Optional"](op_def("Optional", [], ["o"]), ["do"], []) == []
    (grad_op,) = GRADIENTS["OptionalGetElement"](
        op_def("OptionalGetElement", ["o"], ["y"]), ["dy"], ["do"]
    )
    assert (grad_op.type, list(grad_op.input), list(grad_op.output)) == ("Identity", ["dy"], ["do"])
