"""Einsum and Det against NumPy references (np.einsum in float64, np.linalg.det)."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

EQUATIONS = [
    ("ij->ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("ij->", [(3, 4)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk", [(2, 3, 4), (4, 5)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...->...", [(3, 2, 4)]),
    ("ij, jk, kl -> il", [(2, 3), (3, 4), (4, 2)]),
    ("Ab,bA->A", [(3, 2), (2, 3)]),
    ("...j,...j->...", [(1, 3, 4), (2, 1, 4)]),
]


@pytest.mark.parametrize("equation, shapes", EQUATIONS)
def test_einsum(equation, shapes):
    inputs = [rand(*s, seed=i) for i, s in enumerate(shapes)]

    def reference(*xs):
        return (np.einsum(equation, *(x.astype(np.float64) for x in xs)).astype(np.float32),)

    check_op("Einsum", inputs, reference, equation=equation)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.float16])
def test_einsum_dtypes(dtype):
    a, b = (rand(2, 3, seed=1, low=-5, high=5).astype(dtype), rand(3, 2, seed=2).astype(dtype))
    check_op(
        "Einsum",
        [a, b],
        lambda a, b: (np.einsum("ij,jk", a.astype(np.float64), b).astype(dtype),),
        equation="ij,jk",
        atol=1e-2,
        rtol=1e-2,
    )


def test_einsum_bfloat16():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], ml_dtypes.bfloat16)
    (y,) = run_op("Einsum", [x, x], equation="ij,jk->ik")
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [[7, 10], [15, 22]])


def test_einsum_errors():
    with pytest.raises(OperatorError, match="2 input terms"):
        run_op("Einsum", [rand(2, 3)], equation="ij,jk->ik")
    with pytest.raises(OperatorError, match="names 2"):
        run_op("Einsum", [rand(2, 3, 4)], equation="ij->i")
    with pytest.raises(OperatorError, match="does not fit"):
        run_op("Einsum", [rand(2, 3), rand(4, 5)], equation="ij,jk->ik")
    with pytest.raises(OperatorError, match="in no input term"):
        run_op("Einsum", [rand(2, 3)], equation="ij->iz")
    with pytest.raises(OperatorError, match="expected ints or floats"):
        run_op("Einsum", [np.ones((2,), bool)], equation="i->i")


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 2, 2), (0, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det(shape, dtype):
    x = rand(*shape, seed=1, low=-2, high=2).astype(dtype)
    check_op("Det", [x], lambda x: (np.linalg.det(x.astype(np.float64)).astype(dtype),), rtol=1e-4)


def test_det_errors():
    with pytest.raises(OperatorError, match="square matrices"):
        run_op("Det", [rand(2, 3)])
