"""NegativeLogLikelihoodLoss's gradient (w.r.t. input) against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_negative_log_likelihood_loss_gradient(shape, reduction, weighted):
    x = rand(*shape, seed=1, low=-3, high=0)
    target = np.random.default_rng(2).integers(0, shape[1], size=shape[:1] + shape[2:])
    target.flat[0] = 2  # ignored
    weight = rand(shape[1], seed=3, low=0.1, high=1) if weighted else None
    check_gradient(
        "NegativeLogLikelihoodLoss",
        [x, target, weight],
        wrt=0,
        reduction=reduction,
        ignore_index=2,
    )


def test_negative_log_likelihood_loss_gradient_op():
    op = op_def("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["loss"], reduction="sum")
    (grad,) = GRADIENTS["NegativeLogLikelihoodLoss"](op, ["dl"], ["dx", None, None])
    assert grad.type == "NegativeLogLikelihoodLossGradient"
    assert list(grad.input) == ["x", "t", "dl", "w"]
    x, t = np.zeros((2, 3), np.float32), np.array([2, 0])
    (dx,) = run_op("NegativeLogLikelihoodLossGradient", [x, t, np.float32(2.0)], reduction="mean")
    np.testing.assert_array_equal(dx, [[0, 0, -1], [-1, 0, 0]])
