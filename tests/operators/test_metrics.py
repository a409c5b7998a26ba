"""Accuracy against a NumPy reference written with explicit ranks."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_op, rand, run_op


def accuracy64(pred, labels, top_k):
    """Caffe2's rule: the label's rank counts higher scores, and equal ones of lower class."""
    n, d = pred.shape
    correct = 0
    for i in range(n):
        at = pred[i, labels[i]]
        rank = sum(pred[i, j] > at or (pred[i, j] == at and j < labels[i]) for j in range(d))
        correct += rank < top_k
    return (np.asarray(correct / n, np.float32),)


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("top_k", [1, 2, 5])
@pytest.mark.parametrize("n, d", [(1, 5), (8, 5), (20, 10)])
def test_accuracy(n, d, top_k, label_dtype):
    pred = rand(n, d)
    labels = np.random.default_rng(1).integers(0, d, n).astype(label_dtype)
    check_op(
        "Accuracy", [pred, labels], reference=lambda p, l: accuracy64(p, l, top_k), top_k=top_k
    )


def test_accuracy_ties_rank_lower_class_first():
    pred = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]], np.float32)
    (acc,) = run_op("Accuracy", [pred, np.array([0, 1])])
    assert acc == 0.5  # row 0 wins the tie, row 1 loses it
    (acc,) = run_op("Accuracy", [pred, np.array([0, 1])], top_k=2)
    assert acc == 1.0


def test_accuracy_has_no_gradient():
    assert isinstance(GRADIENTS["Accuracy"], NoGradient)


def test_accuracy_errors():
    with pytest.raises(OperatorError, match="'predictions' has 3 dims, expected 2"):
        run_op("Accuracy", [rand(2, 3, 4), np.array([0, 1])])
    with pytest.raises(OperatorError, match=r"'labels' has shape \[3\], expected \[2\]"):
        run_op("Accuracy", [rand(2, 3), np.array([0, 1, 2])])
    with pytest.raises(OperatorError, match="'labels' holds -1, out of range for 3 classes"):
        run_op("Accuracy", [rand(2, 3), np.array([0, -1])])
    with pytest.raises(OperatorError, match="'top_k' is 0, expected >= 1"):
        run_op("Accuracy", [rand(2, 3), np.array([0, 1])], top_k=0)
