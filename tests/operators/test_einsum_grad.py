"""Einsum's and Det's gradients against central differences (and torch for Det)."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
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


def singular(m, rank, seed):
    """An m x m matrix of the given rank: a product of m x rank and rank x m factors."""
    return rand(m, rank, seed=seed) @ rand(rank, m, seed=seed + 1)


@pytest.mark.parametrize(
    "x",
    [
        rand(1, 1, seed=1),
        rand(2, 2, seed=2),
        rand(4, 4, seed=3),
        rand(2, 3, 3, seed=4),
        rand(2, 1, 5, 5, seed=5),
        singular(3, 2, seed=6),  # rank M - 1: the adjugate is not zero
        singular(4, 2, seed=7),  # rank M - 2: the adjugate is zero
        np.zeros((3, 3), np.float32),
    ],
    ids=["1x1", "2x2", "4x4", "batch", "batch2", "rank2of3", "rank2of4", "zeros"],
)
def test_det_gradient(x):
    # det is a polynomial: central differences hold at singular matrices too.
    check_gradient("Det", [x])


def test_det_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    x = rand(3, 4, 4, seed=8, dtype=np.float64)
    dy = rand(3, seed=9, dtype=np.float64)
    (dx,) = run_op("DetGradient", [x, dy])
    t = torch.tensor(x, requires_grad=True)
    torch.det(t).backward(torch.tensor(dy))
    np.testing.assert_allclose(dx, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_det_gradient_kernel():
    x = np.array([[2.0, 1.0], [4.0, 3.0]], np.float32)  # adj(x)^T = [[3, -4], [-1, 2]]
    (dx,) = run_op("DetGradient", [x, np.array(2.0, np.float32)])
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, [[6, -8], [-2, 4]], rtol=1e-6)
    (dx,) = run_op("DetGradient", [np.zeros((2, 0, 0), np.float32), np.ones(2, np.float32)])
    assert dx.shape == (2, 0, 0)
    with pytest.raises(OperatorError, match=r"DetGradient: input dY.*expected \[\]"):
        run_op("DetGradient", [x, np.ones(2, np.float32)])
    op = op_def("Det", ["x"], ["y"])
    (grad,) = GRADIENTS["Det"](op, ["dy"], ["dx"])
    assert grad.type == "DetGradient" and list(grad.input) == ["x", "dy"]
