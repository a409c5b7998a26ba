"""Celu, Swish, HardSwish, Mish, Softsign, ThresholdedRelu, Shrink and Hardmax."""

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_op, rand, run_op

FLOATS = [np.float32, np.float64]


def x64(x):
    return np.asarray(x, np.float64)


def f32(v):
    """An attribute as the float32 a NetDef Argument stores."""
    return float(np.float32(v))


def sigmoid(x):
    return 1 / (1 + np.exp(-x64(x).clip(-700, 700)))


def softplus(x):
    return np.logaddexp(0, x64(x))


def shrink(x, bias, lambd):
    x = x64(x)
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


# case -> (op, attrs, float64 reference)
REFERENCES = {
    "Celu": ("Celu", {}, lambda x: np.maximum(0, x) + np.minimum(0, np.expm1(x64(x)))),
    "Celu-2": (
        "Celu",
        {"alpha": 2.0},
        lambda x: np.maximum(0, x) + np.minimum(0, 2 * (np.exp(x64(x) / 2) - 1)),
    ),
    "Swish": ("Swish", {}, lambda x: x * sigmoid(x)),
    "Swish-0.5": ("Swish", {"alpha": 0.5}, lambda x: x * sigmoid(0.5 * x64(x))),
    "HardSwish": ("HardSwish", {}, lambda x: x * np.clip(x64(x) / 6 + 0.5, 0, 1)),
    "Mish": ("Mish", {}, lambda x: x * np.tanh(softplus(x))),
    "Softsign": ("Softsign", {}, lambda x: x / (1 + np.abs(x64(x)))),
    "ThresholdedRelu": ("ThresholdedRelu", {}, lambda x: np.where(x > 1, x, 0)),
    "ThresholdedRelu-2": ("ThresholdedRelu", {"alpha": 2.0}, lambda x: np.where(x > 2, x, 0)),
    "Shrink": ("Shrink", {}, lambda x: shrink(x, 0.0, 0.5)),
    "Shrink-soft": (
        "Shrink",
        {"bias": 1.5, "lambd": 1.5},
        lambda x: shrink(x, 1.5, 1.5),
    ),
    "Shrink-odd": (
        "Shrink",
        {"bias": 0.3, "lambd": 0.7},
        lambda x: shrink(x, f32(0.3), f32(0.7)),
    ),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4)])
@pytest.mark.parametrize("scale", [4.0, 60.0])
@pytest.mark.parametrize("case", sorted(REFERENCES))
def test_activation(case, scale, shape, dtype):
    op, attrs, fn = REFERENCES[case]
    x = (rand(*shape, dtype=np.float64) * scale).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    check_op(op, [x], reference=lambda x: (fn(x).astype(dtype),), rtol=tol, atol=tol, **attrs)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("case", ["Celu", "Swish", "HardSwish", "Mish", "Softsign"])
def test_half_precision(case, dtype):
    op, attrs, fn = REFERENCES[case]
    x = rand(11, low=-4, high=4).astype(dtype)
    (got,) = run_op(op, [x], **attrs)
    assert got.dtype == dtype
    np.testing.assert_allclose(
        got.astype(np.float64), fn(x.astype(np.float64)), atol=2e-2, rtol=2e-2
    )


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_shrink_int(dtype):
    x = np.arange(0 if dtype == np.uint8 else -5, 6).astype(dtype)
    check_op(
        "Shrink",
        [x],
        reference=lambda x: (shrink(x, 1.0, 1.5).astype(dtype),),
        bias=1.0,
        lambd=1.5,
    )


def hardmax_reference(x, axis):
    moved = np.moveaxis(x, axis, -1)
    flat = moved.reshape(-1, moved.shape[-1])
    out = np.zeros_like(flat)
    for i, row in enumerate(flat):
        out[i, list(row).index(max(row))] = 1  # the first maximum
    return np.moveaxis(out.reshape(moved.shape), -1, axis)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_hardmax(axis, dtype):
    x = rand(3, 4, 5, dtype=dtype)
    check_op("Hardmax", [x], reference=lambda x: (hardmax_reference(x, axis),), axis=axis)


def test_hardmax_ties_and_default_axis():
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)
    check_op("Hardmax", [x], reference=lambda x: (np.array([[0, 1, 0, 0], [1, 0, 0, 0]],
                                                           np.float32),))  # fmt: skip
    check_op("Hardmax", [np.zeros((0, 3), np.float32)], reference=lambda x: (x,))


def test_errors():
    with pytest.raises(OperatorError, match="'axis' is 3, out of range for input of rank 2"):
        run_op("Hardmax", [rand(2, 3)], axis=3)
    with pytest.raises(OperatorError, match="'alpha' is 0"):
        run_op("Celu", [rand(3)], alpha=0.0)
    with pytest.raises(OperatorError, match="'X' has dtype int32, expected a float type"):
        run_op("Mish", [np.ones(3, np.int32)])


def test_hardmax_has_no_gradient():
    assert isinstance(GRADIENTS["Hardmax"], NoGradient)
