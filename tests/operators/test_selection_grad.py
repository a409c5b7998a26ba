"""Gradients of TopK, Compress and Unique against central differences (and torch for TopK)."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


def distinct(*shape, seed=0):
    """Values spaced far more than the finite-difference step apart: no ties in a ranking."""
    return np.random.default_rng(seed).permutation(math.prod(shape)).reshape(shape) / 10.0 - 1


@pytest.mark.parametrize(
    "shape, k, axis",
    [((6,), 3, -1), ((3, 5), 2, 1), ((4, 3), 4, 0), ((2, 3, 4), 1, -2), ((2, 5), 0, 1)],
)
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("sort", [0, 1])
def test_top_k_gradient(shape, k, axis, largest, sort):
    check_gradient(
        "TopK",
        [distinct(*shape), np.array([k], np.int64)],
        outputs=2,
        axis=axis,
        largest=largest,
        sorted=sort,
    )


def test_top_k_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    x, dy = distinct(3, 6, seed=1), rand(3, 4, seed=2, dtype=np.float64)
    op = op_def("TopK", ["x", "k"], ["v", "i"], axis=1)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("k", np.array([4], np.int64))
    ws.feed_blob("dv", dy)
    ws.run_operator_once(op)
    for grad_op in GRADIENTS["TopK"](op, ["dv", None], ["dx", None]):
        ws.run_operator_once(grad_op)
    t = torch.tensor(x, requires_grad=True)
    torch.topk(t, 4, dim=1).values.backward(torch.tensor(dy))
    np.testing.assert_allclose(ws.fetch_blob("dx"), t.grad.numpy(), rtol=1e-12)


def test_top_k_gradient_without_values_gradient_or_named_indices():
    op = op_def("TopK", ["x", "k"], ["v", "i"])
    assert GRADIENTS["TopK"](op, [None, "di"], ["dx", None]) == []
    # Indices left unnamed: the maker computes them again before scattering.
    op = op_def("TopK", ["x", "k"], ["v", ""], axis=0)
    ops = GRADIENTS["TopK"](op, ["dv", None], ["dx", None])
    assert [o.type for o in ops] == ["TopK", "GatherElementsGradient"]
    ws = Workspace()
    x = distinct(4, 2)
    ws.feed_blob("x", x)
    ws.feed_blob("k", np.array([1], np.int64))
    ws.feed_blob("dv", np.array([[2.0, 3.0]]))
    for grad_op in ops:
        ws.run_operator_once(grad_op)
    expected = np.zeros_like(x)
    expected[x.argmax(axis=0), [0, 1]] = [2.0, 3.0]
    np.testing.assert_array_equal(ws.fetch_blob("dx"), expected)


@pytest.mark.parametrize(
    "shape, condition, axis",
    [
        ((3, 2), [0, 1, 1], 0),
        ((3, 2), [1, 0], 1),
        ((3, 2), [1, 0, 1, 1], None),
        ((2, 3, 4), [1, 0, 1, 1], -1),
        ((3, 2), [1, 0, 1, 0, 0], 0),  # longer than the dim; the extra entries are false
        ((2, 3), [0, 0, 0], 1),
    ],
)
def test_compress_gradient(shape, condition, axis):
    attrs = {} if axis is None else {"axis": axis}
    check_gradient("Compress", [rand(*shape), np.array(condition, bool)], **attrs)


def test_compress_gradient_kernel():
    (dx,) = run_op(
        "CompressGradient",
        [np.array([5.0, 7.0], np.float32), rand(2, 2), np.array([0, 1, 1], bool)],
    )
    np.testing.assert_array_equal(dx, [[0, 5], [7, 0]])
    with pytest.raises(OperatorError, match=r"CompressGradient.*expected \[2\]"):
        run_op("CompressGradient", [rand(3), rand(2, 2), np.array([0, 1, 1], bool)])


@pytest.mark.parametrize(
    "shape, axis", [((7,), None), ((3, 4), None), ((4, 3), 0), ((2, 5), 1), ((2, 3, 2), -1)]
)
@pytest.mark.parametrize("sort", [0, 1])
def test_unique_gradient(shape, axis, sort):
    # Distinct values: every element (slice) is its own unique one, and stays so nearby.
    attrs = {} if axis is None else {"axis": axis}
    check_gradient("Unique", [distinct(*shape, seed=3)], outputs=4, sorted=sort, **attrs)


@pytest.mark.parametrize("sort", [0, 1])
def test_unique_gradient_goes_to_first_occurrence(sort):
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0], np.float32)
    y, first = run_op("Unique", [x], outputs=2, sorted=sort)
    dy = np.arange(1, y.size + 1, dtype=np.float32)
    (dx,) = run_op("UniqueGradient", [dy, x], sorted=sort)
    expected = np.zeros_like(x)
    expected[first] = dy
    np.testing.assert_array_equal(dx, expected)
    assert dx[2] == 0 and dx[4] == 0  # repeats get nothing


def test_unique_gradient_kernel_checks_dy_and_slices():
    x = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], np.float32)
    (dx,) = run_op("UniqueGradient", [np.ones((2, 2), np.float32), x], axis=0)
    np.testing.assert_array_equal(dx, [[1, 1], [0, 0], [1, 1]])
    with pytest.raises(OperatorError, match=r"UniqueGradient.*expected \[2, 2\]"):
        run_op("UniqueGradient", [np.ones((3, 2), np.float32), x], axis=0)
    op = op_def("Unique", ["x"], ["y", "i", "inv", "c"])
    assert GRADIENTS["Unique"](op, [None, "di", None, None], ["dx"]) == []
