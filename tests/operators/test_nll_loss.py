"""NegativeLogLikelihoodLoss against a loop reference written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def ref_nll(x, target, weight=None, ignore_index=None, reduction="mean"):
    loss = np.zeros(target.shape, np.float64)
    used = np.zeros(target.shape, np.float64)
    for pos in np.ndindex(*target.shape):
        t = int(target[pos])
        if t == ignore_index:
            continue
        w = 1.0 if weight is None else float(weight[t])
        loss[pos] = -float(x[(pos[0], t, *pos[1:])]) * w
        used[pos] = w
    if reduction == "sum":
        loss = loss.sum()
    elif reduction == "mean":
        loss = loss.sum() / used.sum()
    return (np.asarray(loss, x.dtype),)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 4, 2, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1, -1])
def test_negative_log_likelihood_loss(shape, reduction, weighted, ignore_index):
    x = rand(*shape, seed=1, low=-3, high=0)
    target = np.random.default_rng(2).integers(0, shape[1], size=shape[:1] + shape[2:])
    if ignore_index is not None:
        target.flat[0] = ignore_index
    weight = rand(shape[1], seed=3, low=0.1, high=1) if weighted else None
    attrs = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    check_op(
        "NegativeLogLikelihoodLoss",
        [x, target, weight],
        lambda x, t, w: ref_nll(x, t, w, ignore_index, reduction),
        **attrs,
    )


def test_negative_log_likelihood_loss_all_ignored_mean_is_nan():
    (y,) = run_op("NegativeLogLikelihoodLoss", [rand(2, 3), np.array([1, 1])], ignore_index=1)
    assert y.shape == () and np.isnan(y)


def test_negative_log_likelihood_loss_errors():
    with pytest.raises(OperatorError, match="out of range for 3 classes"):
        run_op("NegativeLogLikelihoodLoss", [rand(2, 3), np.array([0, 3])])
    with pytest.raises(OperatorError, match="input 'target' has shape"):
        run_op("NegativeLogLikelihoodLoss", [rand(2, 3, 4), np.array([0, 1])])
    with pytest.raises(OperatorError, match="input 'weight' has shape"):
        run_op("NegativeLogLikelihoodLoss", [rand(2, 3), np.array([0, 1]), rand(2)])
    with pytest.raises(OperatorError, match="reduction='avg'"):
        run_op("NegativeLogLikelihoodLoss", [rand(2, 3), np.array([0, 1])], reduction="avg")
