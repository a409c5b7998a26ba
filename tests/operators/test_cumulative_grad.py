"""Gradients of CumSum, CumProd and ReverseSequence against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.netdef.args import args_dict
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("shape, axis", [((5,), 0), ((2, 3, 4), 1), ((2, 3), -1)])
def test_cumsum_gradient(shape, axis, exclusive, reverse):
    check_gradient("CumSum", [rand(*shape), np.array(axis, np.int64)],
                   exclusive=exclusive, reverse=reverse)  # fmt: skip


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("shape, axis", [((5,), 0), ((2, 3, 4), 1), ((2, 3), -1)])
def test_cumprod_gradient(shape, axis, exclusive, reverse):
    x = rand(*shape, low=0.5, high=1.5) * np.where(rand(*shape, seed=1) > 0, 1, -1)
    check_gradient("CumProd", [x, np.array(axis, np.int64)],
                   exclusive=exclusive, reverse=reverse)  # fmt: skip


@pytest.mark.parametrize(
    "shape, lens, batch_axis, time_axis",
    [((4, 3), (4, 0, 2), 1, 0), ((3, 5, 2), (5, 2, 1), 0, 1)],
)
def test_reverse_sequence_gradient(shape, lens, batch_axis, time_axis):
    check_gradient("ReverseSequence", [rand(*shape), np.array(lens, np.int64)],
                   batch_axis=batch_axis, time_axis=time_axis)  # fmt: skip


def test_gradient_op_types():
    op = op_def("CumSum", ["x", "a"], ["y"], reverse=1)
    (grad,) = GRADIENTS["CumSum"](op, ["dy"], ["dx", None])
    assert grad.type == "CumSum" and args_dict(grad.arg)["reverse"] == 0
    (grad,) = GRADIENTS["CumProd"](op_def("CumProd", ["x", "a"], ["y"]), ["dy"], ["dx", None])
    assert grad.type == "CumProdGradient"
