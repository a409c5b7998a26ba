"""CUDA broadcasting ops (elementwise_binary.cu): arithmetic, Pow, the variadic ops,
comparisons, logic, Where, SumReduceLike and the broadcast gradients, against their NumPy
kernels."""

import numpy as np
import pytest
from elementwise_cases import SHAPES, TOL, check_outputs, data, run_device

from netbrew import cuda
from netbrew.errors import OperatorError
from netbrew.operators.cuda.elementwise_binary import sum_cuda
from netbrew.testing import check_device

FLOATS = [np.float32, np.float16, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS

# (A, B) shapes: equal (the direct path), ONNX broadcasting both ways, a 0-d input, empty.
PAIRS = [
    ((7,), (7,)),
    ((257,), (257,)),
    ((3, 5, 33), (3, 5, 33)),
    ((3, 5, 33), (5, 1)),
    ((1,), (257,)),
    ((2, 1, 4), (3, 1)),
    ((), (3, 4)),
    ((1, 1), (3, 4)),
    ((0, 3), (3,)),
    ((4, 1), (0,)),
]
PAIR_IDS = [f"{a}-{b}" for a, b in PAIRS]


def operands(a_shape, b_shape, dtype, low=-3.0, high=3.0):
    return data(a_shape, dtype, low, high), data(b_shape, dtype, low, high, seed=1)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("a_shape,b_shape", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
def test_arithmetic(op, a_shape, b_shape, dtype):
    check_device(op, operands(a_shape, b_shape, dtype, -100, 100), **TOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("a_shape,b_shape", PAIRS, ids=PAIR_IDS)
def test_div(a_shape, b_shape, dtype):
    a, b = operands(a_shape, b_shape, dtype, -100, 100)
    b[(b >= 0) & (b < 1)] = 3  # no zero divisors (integer inputs truncate toward zero)
    b[(b < 0) & (b > -1)] = -7
    check_device("Div", [a, b], **TOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype", INTS)
def test_integer_div_by_zero_raises(dtype):
    with pytest.raises(OperatorError, match="contains zeros"):
        run_device("Div", [np.array([4, 5], dtype), np.array([2, 0], dtype)])


def test_float_specials():
    a = np.array([1.0, -1.0, 0.0, np.nan, np.inf, 2.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 1.0, np.nan, -np.inf], np.float32)
    for op in ("Add", "Sub", "Mul", "Div", "Max", "Min"):
        check_device(op, [a, b])


def test_mixed_dtypes_are_refused_like_the_cpu():
    with pytest.raises(Exception, match="expected float32"):
        check_device("Add", [np.zeros(3, np.float32), np.zeros(3, np.float16)])


# (base dtype, exponent dtype, base range, exponent range)
POW_CASES = [
    (np.float32, np.float32, (0.1, 3), (-2, 2)),
    (np.float32, np.int64, (-3, 3), (-3, 4)),
    (np.float16, np.float16, (0.1, 3), (-2, 2)),
    (np.float16, np.int32, (-3, 3), (-3, 4)),
    (np.float64, np.float64, (0.1, 3), (-2, 2)),
    (np.float64, np.float32, (0.1, 3), (-2, 2)),
    (np.int32, np.int32, (-4, 5), (-3, 9)),
    (np.int64, np.int64, (-4, 5), (-3, 40)),
    (np.int64, np.int32, (-4, 5), (-3, 9)),
    (np.int32, np.float32, (0, 9), (0, 3)),
]


@pytest.mark.parametrize("a_shape,b_shape", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "tx,ty,xr,yr", POW_CASES, ids=[f"{c[0].__name__}-{c[1].__name__}" for c in POW_CASES]
)
def test_pow(tx, ty, xr, yr, a_shape, b_shape):
    x, y = data(a_shape, tx, *xr), data(b_shape, ty, *yr, seed=1)
    if np.dtype(ty).kind == "f" and xr[0] < 0:
        y = np.round(y)  # a negative base needs whole exponents
    check_device("Pow", [x, y], **TOL[np.dtype(tx)])


# --- variadic ---------------------------------------------------------------------------------

VARIADIC = [
    [(7,)],
    [(3, 5, 33)],
    [(7,), (7,)],
    [(3, 5, 33), (5, 1), (33,)],
    [(1,), (257,), (2, 1)],
    [(0, 3), (3,)],
    [(), (4,), (2, 1)],
]


@pytest.mark.parametrize("shapes", VARIADIC, ids=[str(s) for s in VARIADIC])
@pytest.mark.parametrize(
    "op,dtype",
    [(op, dt) for op in ("Sum", "Mean") for dt in FLOATS]
    + [(op, dt) for op in ("Max", "Min") for dt in NUMERIC],
)
def test_variadic(op, dtype, shapes):
    inputs = [data(s, dtype, -50, 50, seed=i) for i, s in enumerate(shapes)]
    check_device(op, inputs, **TOL[np.dtype(dtype)])


def test_sum_of_sequences():
    """Autodiff sums sequence gradients with Sum: lists of GPU arrays, item by item."""
    a = [data((3,), np.float32), data((2, 2), np.float32)]
    b = [data((3,), np.float32, seed=1), data((2, 2), np.float32, seed=1)]
    out = sum_cuda([cuda.to_gpu(v) for v in a], [cuda.to_gpu(v) for v in b])[0]
    assert len(out) == 2
    for o, x, y in zip(out, a, b):
        np.testing.assert_allclose(cuda.to_host(o), x + y, rtol=1e-6)


# --- comparisons and logic --------------------------------------------------------------------

ALL = NUMERIC + [np.bool_]


def ties(shape, dtype, seed):
    """Small integers as `dtype`, so equal values are common."""
    return np.floor(data(shape, np.float64, -3, 3, seed=seed)).astype(dtype)


@pytest.mark.parametrize("a_shape,b_shape", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize(
    "op,dtype",
    [(op, dt) for op in ("Equal", "Less", "Greater") for dt in ALL]
    + [(op, dt) for op in ("LessOrEqual", "GreaterOrEqual") for dt in NUMERIC],
)
def test_compare(op, dtype, a_shape, b_shape):
    check_device(op, [ties(a_shape, dtype, 0), ties(b_shape, dtype, 1)])


def test_compare_nan():
    a = np.array([np.nan, 1.0, np.nan], np.float32)
    b = np.array([np.nan, np.nan, 1.0], np.float32)
    for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
        check_device(op, [a, b])


@pytest.mark.parametrize("a_shape,b_shape", PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op, a_shape, b_shape):
    check_device(op, [data(a_shape, np.float32) > 0, data(b_shape, np.float32, seed=1) > 0])


@pytest.mark.parametrize("shape", SHAPES)
def test_not(shape):
    check_device("Not", [data(shape, np.float32) > 0])


WHERE_SHAPES = [
    ((7,), (7,), (7,)),
    ((3, 5, 33), (3, 5, 33), (3, 5, 33)),
    ((3, 5, 33), (5, 1), (33,)),
    ((1,), (257,), ()),
    ((2, 1), (0,), (1,)),
]


@pytest.mark.parametrize("shapes", WHERE_SHAPES, ids=[str(s) for s in WHERE_SHAPES])
@pytest.mark.parametrize("dtype", ALL + [np.int8, np.uint16])
def test_where(dtype, shapes):
    c_shape, x_shape, y_shape = shapes
    cond = data(c_shape, np.float32) > 0
    check_device("Where", [cond, ties(x_shape, dtype, 1), ties(y_shape, dtype, 2)])


# --- SumReduceLike ----------------------------------------------------------------------------

REDUCE = [
    ((7,), (7,)),
    ((3, 4, 5), (4, 1)),
    ((3, 4, 5), (1,)),
    ((3, 4, 5), ()),
    ((3, 4, 5), (3, 1, 5)),
    ((1, 5), (5,)),
    ((2, 3, 257), (3, 1)),
    ((300, 40), (40,)),
    ((5, 3000), (5, 1)),
    ((0, 4), (4,)),
    ((2, 3, 0), (3, 1)),
    ((2, 0, 3), (0, 1)),
]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("a_shape,b_shape", REDUCE, ids=[f"{a}-{b}" for a, b in REDUCE])
def test_sum_reduce_like(a_shape, b_shape, dtype):
    a = data(a_shape, dtype, -100, 100) if np.dtype(dtype).kind == "i" else data(a_shape, dtype)
    tol = {"atol": 0.05, "rtol": 1e-2} if dtype == np.float16 else TOL[np.dtype(dtype)]
    check_device("SumReduceLike", [a, data(b_shape, np.float32)], **tol)


def test_sum_reduce_like_refuses_shapes_that_do_not_broadcast():
    with pytest.raises(OperatorError, match="does not broadcast"):
        run_device("SumReduceLike", [data((3, 4), np.float32), data((3,), np.float32)])


# --- gradients --------------------------------------------------------------------------------

GRAD_PAIRS = [((7,), (7,)), ((3, 5, 33), (5, 1)), ((1,), (2, 3)), ((), (4,)), ((0, 3), (3,))]
MASKS = [("dx", "dy"), ("dx", ""), ("", "dy")]


@pytest.mark.parametrize("mask", MASKS, ids=["both", "dX", "dY"])
@pytest.mark.parametrize("a_shape,b_shape", GRAD_PAIRS, ids=[f"{a}-{b}" for a, b in GRAD_PAIRS])
@pytest.mark.parametrize(
    "tx,ty",
    [
        (np.float32, np.float32),
        (np.float16, np.float16),
        (np.float64, np.float32),
        (np.float32, np.int64),
    ],  # fmt: skip
)
def test_pow_gradient(tx, ty, a_shape, b_shape, mask):
    x = data(a_shape, tx, 0.2, 2)
    y = data(b_shape, ty, -2, 3, seed=1)
    z = np.power(x, y).astype(tx)
    dz = data(z.shape, tx, seed=2)
    tol = {"atol": 0.05, "rtol": 2e-2} if tx == np.float16 else {"atol": 1e-5, "rtol": 1e-5}
    check_outputs("PowGradient", [x, y, z, dz], mask, **tol)


@pytest.mark.parametrize("shapes", VARIADIC[2:], ids=[str(s) for s in VARIADIC[2:]])
@pytest.mark.parametrize("op", ["MaxGradient", "MinGradient"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_select_gradient(op, dtype, shapes):
    xs = [ties(s, dtype, i) for i, s in enumerate(shapes)]
    fold = np.maximum if op == "MaxGradient" else np.minimum
    y = xs[0].copy() if len(xs) == 1 else np.asarray(fold.reduce(np.broadcast_arrays(*xs)))
    dy = data(y.shape, dtype, seed=9)
    outs = [f"d{i}" for i in range(len(xs))]
    check_outputs(op, [y.astype(dtype), dy, *xs], outs, **TOL[np.dtype(dtype)])
    outs[0] = ""  # the first input's gradient not wanted: its X slot is omitted, as makers do
    check_outputs(op, [y.astype(dtype), dy, None, *xs[1:]], outs, **TOL[np.dtype(dtype)])


@pytest.mark.parametrize("shapes", VARIADIC, ids=[str(s) for s in VARIADIC])
@pytest.mark.parametrize("dtype", FLOATS)
def test_mean_gradient(dtype, shapes):
    xs = [data(s, dtype, seed=i) for i, s in enumerate(shapes)]
    out_shape = np.broadcast_shapes(*shapes)
    dy = data(out_shape, dtype, seed=9)
    outs = [f"d{i}" for i in range(len(xs))]
    tol = {"atol": 0.05, "rtol": 1e-2} if dtype == np.float16 else TOL[np.dtype(dtype)]
    check_outputs("MeanGradient", [dy, *xs], outs, **tol)


@pytest.mark.parametrize("mask", MASKS, ids=["both", "dX", "dY"])
@pytest.mark.parametrize("shapes", WHERE_SHAPES, ids=[str(s) for s in WHERE_SHAPES])
@pytest.mark.parametrize("dtype", FLOATS)
def test_where_gradient(dtype, shapes, mask):
    c_shape, x_shape, y_shape = shapes
    cond = data(c_shape, np.float32) > 0
    d = data(np.broadcast_shapes(*shapes), dtype, seed=3)
    x = data(x_shape, dtype) if mask[0] else None
    y = data(y_shape, dtype, seed=1) if mask[1] else None
    tol = {"atol": 0.05, "rtol": 1e-2} if dtype == np.float16 else TOL[np.dtype(dtype)]
    check_outputs("WhereGradient", [cond, d, x, y], mask, **tol)
