"""CUDA unary math, activations and Clip (elementwise.cu), and their gradients, against
their NumPy kernels."""

import numpy as np
import pytest
from elementwise_cases import SHAPES, TOL, data

from netbrew.testing import check_device, run_op

FLOATS = [np.float32, np.float16, np.float64]
NUMERIC = FLOATS + [np.int32, np.int64]

# op -> (dtypes, input range); ranges keep the fast-math intrinsics (__expf, __sinf,
# __logf...) well inside the tolerances.
UNARY = {
    "Neg": (NUMERIC, (-3, 3)),
    "Abs": (NUMERIC, (-3, 3)),
    "Sign": (NUMERIC, (-3, 3)),
    "Exp": (FLOATS, (-3, 3)),
    "Log": (FLOATS, (0.05, 4)),
    "Sqrt": (FLOATS, (0, 4)),
    "Reciprocal": (FLOATS, (0.25, 4)),
    "Sin": (FLOATS, (-3, 3)),
    "Cos": (FLOATS, (-3, 3)),
    "Tanh": (FLOATS, (-4, 4)),
    "Sigmoid": (FLOATS, (-8, 8)),
    "Erf": (FLOATS, (-3, 3)),
    "Floor": (FLOATS, (-3, 3)),
    "Ceil": (FLOATS, (-3, 3)),
    "Softplus": (FLOATS, (-8, 8)),
    "HardSwish": (FLOATS, (-5, 5)),
}
UNARY_CASES = [(op, dt) for op, (dts, _) in UNARY.items() for dt in dts]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op,dtype", UNARY_CASES, ids=[f"{o}-{d.__name__}" for o, d in UNARY_CASES])
def test_unary(op, dtype, shape):
    low, high = UNARY[op][1]
    check_device(op, [data(shape, dtype, low, high)], **TOL[np.dtype(dtype)])


def test_unary_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, -2.5, 2.5], np.float32)
    for op in ("Neg", "Abs", "Sign", "Floor", "Ceil", "Tanh", "Sigmoid", "Erf", "Softplus"):
        check_device(op, [x])
    check_device("Exp", [np.array([-100.0, 0.0, 100.0, np.nan], np.float32)])
    check_device("Log", [np.array([0.0, -1.0, 1.0, np.inf], np.float32)])
    check_device("Sqrt", [np.array([0.0, -1.0, 4.0, np.inf], np.float32)])
    check_device("Reciprocal", [np.array([0.0, -0.0, 4.0, np.inf], np.float32)])


def test_unary_rejects_integers_like_the_cpu():
    with pytest.raises(Exception, match="expected a float type"):
        check_device("Sin", [np.arange(4, dtype=np.int32)])


ATTR_CASES = [
    ("LeakyRelu", {}),
    ("LeakyRelu", {"alpha": 0.3}),
    ("LeakyRelu", {"alpha": -0.5}),
    ("Elu", {}),
    ("Elu", {"alpha": 0.5}),
    ("Selu", {}),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}),
    ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 0.5, "beta": 0.25}),
    ("Gelu", {}),
    ("Gelu", {"approximate": "tanh"}),
]
ATTR_IDS = [
    f"{op}-{'-'.join(f'{k}={v}' for k, v in a.items()) or 'default'}" for op, a in ATTR_CASES
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op,attrs", ATTR_CASES, ids=ATTR_IDS)
def test_activation(op, attrs, shape, dtype):
    check_device(op, [data(shape, dtype, -4, 4)], **TOL[np.dtype(dtype)], **attrs)


def test_gelu_rejects_an_unknown_approximation():
    with pytest.raises(Exception, match="approximate"):
        check_device("Gelu", [data((3,), np.float32)], approximate="erf")


CLIP_BOUNDS = [(None, None), (-0.5, None), (None, 0.25), (-0.5, 0.5), (0.5, -0.5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("low,high", CLIP_BOUNDS)
def test_clip(low, high, dtype, shape):
    scale = 10 if np.dtype(dtype).kind == "i" else 1
    x = data(shape, dtype, -scale, scale)
    bounds = [None if b is None else np.array(b * scale, dtype) for b in (low, high)]
    check_device("Clip", [x, *bounds], **TOL[np.dtype(dtype)])


def test_clip_nan_and_bad_bounds():
    x = np.array([np.nan, -1.0, 0.0, 1.0], np.float32)
    check_device("Clip", [x, np.array(-0.5, np.float32), np.array(0.5, np.float32)])
    check_device("Clip", [x, np.array(np.nan, np.float32), None])
    with pytest.raises(Exception, match="expected a scalar"):
        check_device("Clip", [x, np.zeros(2, np.float32), None])


# --- gradients -------------------------------------------------------------------------------

# op -> (first input's range: Y or X as the op reads it, attrs)
GRADIENTS = {
    "SigmoidGradient": ((0.01, 0.99), {}),
    "TanhGradient": ((-0.99, 0.99), {}),
    "SoftplusGradient": ((0.01, 5), {}),
    "SqrtGradient": ((0.1, 2), {}),
    "ReciprocalGradient": ((-2, 2), {}),
    "AbsGradient": ((-2, 2), {}),
    "SinGradient": ((-3, 3), {}),
    "CosGradient": ((-3, 3), {}),
    "ErfGradient": ((-3, 3), {}),
    "HardSwishGradient": ((-5, 5), {}),
    "HardSigmoidGradient": ((-0.5, 1.5), {"alpha": 0.5, "beta": 0.25}),
    "GeluGradient": ((-4, 4), {}),
}
GRAD_CASES = [(op, {}) for op in GRADIENTS] + [("GeluGradient", {"approximate": "tanh"})]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op,extra", GRAD_CASES, ids=[f"{o}-{len(e)}" for o, e in GRAD_CASES])
def test_gradient(op, extra, shape, dtype):
    (low, high), attrs = GRADIENTS[op]
    u, dy = data(shape, dtype, low, high), data(shape, dtype, seed=1)
    check_device(op, [u, dy], **TOL[np.dtype(dtype)], **attrs, **extra)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_abs_gradient_integers(dtype):
    check_device("AbsGradient", [np.array([-3, 0, 2], dtype), np.array([5, 6, 7], dtype)])


Y_OR_X = [
    ("LeakyReluGradient", {"alpha": 0.2}),
    ("LeakyReluGradient", {"alpha": -0.3}),
    ("EluGradient", {"alpha": 1.0}),
    ("EluGradient", {"alpha": -0.5}),
    ("SeluGradient", {}),
    ("SeluGradient", {"alpha": 1.2, "gamma": 0.7}),
]


@pytest.mark.parametrize("with_x", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op,attrs", Y_OR_X, ids=[f"{o}-{a}" for o, a in Y_OR_X])
def test_y_or_x_gradient(op, attrs, shape, dtype, with_x):
    forward = op.removesuffix("Gradient")
    x = data(shape, dtype, -3, 3)
    y = run_op(forward, [x], **attrs)[0]
    inputs = [y, data(shape, dtype, seed=1)] + ([x] if with_x else [])
    check_device(op, inputs, **TOL[np.dtype(dtype)], **attrs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("low,high", CLIP_BOUNDS)
def test_clip_gradient(low, high, shape, dtype):
    x, dy = data(shape, dtype, -1, 1), data(shape, dtype, seed=1)
    bounds = [None if b is None else np.array(b, dtype) for b in (low, high)]
    check_device("ClipGradient", [x, dy, *bounds])
