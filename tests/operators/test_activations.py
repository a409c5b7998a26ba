"""Relu, LeakyRelu, PRelu, Sigmoid, Tanh, Elu, Selu, Softplus, HardSigmoid and Gelu."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

FLOATS = [np.float32, np.float64]
SHAPES = [(), (7,), (2, 3, 4)]
SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875  # ONNX float32 defaults


def f32(v):
    """An attribute as the float32 a NetDef Argument stores."""
    return float(np.float32(v))


def x64(x):
    return x.astype(np.float64)


def sigmoid(x):
    return 1 / (1 + np.exp(-x64(x).clip(-700, 700)))


def erf_ref(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x64(x))


# op -> (attrs, float64 reference); each reference is the ONNX formula written out directly
REFERENCES = {
    "Relu": ({}, lambda x: np.where(x > 0, x, 0)),
    "LeakyRelu": ({}, lambda x: np.where(x < 0, 0.01 * x64(x), x)),
    "LeakyRelu-0.2": ({"alpha": 0.2}, lambda x: np.where(x < 0, f32(0.2) * x64(x), x)),
    "Sigmoid": ({}, sigmoid),
    "Tanh": ({}, lambda x: np.tanh(x64(x))),
    "Elu": ({}, lambda x: np.where(x < 0, np.exp(x64(x).clip(max=0)) - 1, x)),
    "Elu-0.5": ({"alpha": 0.5}, lambda x: np.where(x < 0, 0.5 * np.expm1(x64(x).clip(max=0)), x)),
    "Selu": (
        {},
        lambda x: SELU_G * np.where(x <= 0, SELU_A * np.expm1(x64(x).clip(max=0)), x),
    ),
    "Selu-custom": (
        {"alpha": 2.0, "gamma": 3.0},
        lambda x: 3.0 * np.where(x <= 0, 2.0 * np.expm1(x64(x).clip(max=0)), x),
    ),
    "Softplus": ({}, lambda x: np.logaddexp(0, x64(x))),
    "HardSigmoid": ({}, lambda x: np.clip(0.2 * x64(x) + 0.5, 0, 1)),
    "HardSigmoid-custom": (
        {"alpha": 0.5, "beta": 0.1},
        lambda x: np.clip(0.5 * x + f32(0.1), 0, 1),
    ),
    "Gelu": ({}, lambda x: 0.5 * x * (1 + erf_ref(x / math.sqrt(2)))),
    "Gelu-tanh": (
        {"approximate": "tanh"},
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x64(x) ** 3))),
    ),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [3.0, 60.0])  # large |x| must not overflow or lose accuracy
@pytest.mark.parametrize("case", sorted(REFERENCES))
def test_activation(case, scale, shape, dtype):
    attrs, fn = REFERENCES[case]
    x = (rand(*shape, dtype=np.float64) * scale).astype(dtype)
    check_op(
        case.split("-")[0],
        [x],
        reference=lambda x: (np.asarray(fn(x)).astype(dtype),),
        rtol=1e-5 if dtype == np.float32 else 1e-12,
        atol=1e-6 if dtype == np.float32 else 1e-12,
        **attrs,
    )


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_relu_int(dtype):
    x = np.arange(-5, 5, dtype=dtype)
    check_op("Relu", [x], reference=lambda x: (np.where(x > 0, x, 0).astype(dtype),))


def test_sigmoid_softplus_extremes():
    x = np.array([-1000, -100, -30, 0, 30, 100, 1000], np.float32)
    check_op("Sigmoid", [x], reference=lambda x: (sigmoid(x).astype(np.float32),), atol=0)
    check_op("Softplus", [x], reference=lambda x: (np.logaddexp(0, x64(x)).astype(np.float32),))


def test_gelu_tails():
    x = np.array([-40, -10, -5, -1e-3, 0, 1e-3, 5, 10, 40], np.float64)
    exact = 0.5 * x * np.vectorize(math.erfc, otypes=[np.float64])(-x / math.sqrt(2))
    check_op("Gelu", [x], reference=lambda x: (exact,), rtol=1e-13, atol=0)


@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
@pytest.mark.parametrize(
    "x_shape, slope_shape",
    [((2, 3, 4, 4), (3, 1, 1)), ((3, 4), (4,)), ((3, 4), ()), ((5,), (5,)), ((2, 3, 4), (3,))],
)
def test_prelu(x_shape, slope_shape, dtype):
    x = (rand(*x_shape, dtype=np.float64, low=-5, high=5)).astype(dtype)
    slope = (rand(*slope_shape, dtype=np.float64, seed=1, low=0, high=3)).astype(dtype)

    def reference(x, slope):
        if slope.ndim == 1 and x.ndim > 2 and slope.shape[0] == x.shape[1]:
            slope = slope.reshape(-1, *[1] * (x.ndim - 2))  # per-channel, as PyTorch exports
        s = np.broadcast_to(slope, x.shape)
        out = x.copy()
        out[x < 0] = x[x < 0] * s[x < 0]
        return (out,)

    check_op("PRelu", [x, slope], reference=reference)


def test_errors():
    with pytest.raises(OperatorError, match=r"'slope' has shape \[5\], which does not broadcast"):
        run_op("PRelu", [rand(2, 3, 4, 4), rand(5)])
    with pytest.raises(OperatorError, match="'approximate' is 'fast', expected 'none' or 'tanh'"):
        run_op("Gelu", [rand(3)], approximate="fast")
    with pytest.raises(OperatorError, match="'X' has dtype int32, expected a float type"):
        run_op("Sigmoid", [np.ones(3, np.int32)])
