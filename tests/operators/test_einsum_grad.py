"""Einsum's gradient against central differences."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, rand, run_op

CASES = [
    ("ij->ji", [(3, 4)]),
    ("ij->i", [(3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("...j,...j->...", [(1, 3, 4), (2, 1, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij,k->i", [(2, 3), (4,)]),
    ("ijk,ik->j", [(2, 3, 2), (2, 2)]),
]


@pytest.mark.parametrize("equation, shapes", CASES)
def test_einsum_gradient(equation, shapes):
    inputs = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    check_gradient("Einsum", inputs, equation=equation)


def test_einsum_gradient_op():
    op = op_def("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")
    (grad,) = GRADIENTS["Einsum"](op, ["dy"], [None, "db"])
    assert grad.type == "EinsumGradient"
    assert list(grad.input) == ["dy", "a", "b"] and list(grad.output) == ["", "db"]
    a, b, dy = rand(2, 3, seed=1), rand(3, 4, seed=2), rand(2, 4, seed=3)
    (db,) = run_op("EinsumGradient", [dy, a, b], outputs=["", "db"], equation="ij,jk->ik")
    np.testing.assert_allclose(db, a.T @ dy, rtol=1e-5)
    assert isinstance(GRADIENTS["Det"], NoGradient)
