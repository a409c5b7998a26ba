"""CUDA reductions (reduce.cu) against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import check_device, rand, run_op

# (shape, axes): None omits the axes input. Shapes cover empty tensors, size-1 dims, 1, 7 and
# 257 along the reduced axes, several axes, and both launch modes (a block per output, and a
# thread per output for short reductions or kept inner dims).
CASES = [
    ((0,), None),
    ((1,), None),
    ((7,), [0]),
    ((), None),
    ((3, 257), [1]),
    ((257, 3), [0]),
    ((257, 3), [-1]),
    ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [-1, 0]),
    ((2, 3, 5, 7), [1, 3]),
    ((5, 1, 2), [1]),
    ((4, 0, 3), [1]),
    ((4, 0, 3), [0]),
    ((3, 2048), [0]),
    ((40, 1100), [0]),
    ((2, 600, 3), None),
]

TOLERANCE = {np.float32: 1e-5, np.float16: 2e-3, np.float64: 1e-12}


def data(shape, dtype, seed=0):
    if np.dtype(dtype).kind == "i":
        return (rand(*shape, seed=seed) * 1000).astype(dtype)
    return rand(*shape, seed=seed).astype(dtype)


def axes_input(axes):
    return None if axes is None else np.array(axes, np.int64)


def tol(dtype):
    t = TOLERANCE.get(dtype, 0)
    return {"atol": t, "rtol": t}


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("shape, axes", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_float32(op, shape, axes, keepdims):
    x = data(shape, np.float32)
    check_device(op, [x, axes_input(axes)], keepdims=keepdims, **tol(np.float32))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape, axes", [((7,), None), ((3, 257), [1]), ((257, 3), [0]),
                                         ((2, 3, 5, 7), [0, 3]), ((3, 2048), [0])])  # fmt: skip
def test_reduce_dtypes(op, dtype, shape, axes):
    check_device(op, [data(shape, dtype), axes_input(axes)], **tol(dtype))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_empty_axes(op, noop):
    x = data((3, 4), np.float32)
    check_device(op, [x, np.zeros(0, np.int64)], noop_with_empty_axes=noop)
    check_device(op, [x], noop_with_empty_axes=noop)


def test_reduce_max_min_nan_propagates():
    x = data((4, 40), np.float32)
    x[1, 7] = x[2, 39] = np.nan
    for op in ("ReduceMax", "ReduceMin"):
        check_device(op, [x, np.array([1], np.int64)])


def run_device(op_type, inputs, **attrs):
    ws = Workspace()
    for i, value in enumerate(inputs):
        ws.feed_blob(f"in{i}", value, device="cuda:0")
    names = [f"in{i}" for i in range(len(inputs))]
    ws.run_operator_once(op_def(op_type, names, ["out"], device="cuda:0", **attrs))
    return ws.fetch_blob("out")


def test_reduce_errors_name_the_op():
    with pytest.raises(OperatorError, match="ReduceSum: axis 2"):
        run_device("ReduceSum", [data((2, 3), np.float32), np.array([2], np.int64)])
    with pytest.raises(OperatorError, match="ReduceMin: no CUDA kernel for dtype bool"):
        run_device("ReduceMin", [np.ones((2, 3), bool)])
    with pytest.raises(OperatorError, match="ArgMax: data"):
        run_device("ArgMax", [np.ones((2, 0), np.float32)], axis=1)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(
    "shape, axis",
    [((1,), 0), ((7,), 0), ((3, 257), 1), ((257, 3), 0), ((2, 3, 4), 1), ((2, 3, 4), -1),
     ((0, 5), 1), ((40, 1100), 0), ((3, 2048), 0), ((2, 5, 40), 1)],
)  # fmt: skip
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(op, shape, axis, keepdims, last):
    x = np.round(data(shape, np.float32) * 3)  # many ties
    check_device(op, [x], axis=axis, keepdims=keepdims, select_last_index=last)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64])
def test_arg_dtypes(op, dtype):
    x = data((5, 257), dtype) // 100 if np.dtype(dtype).kind == "i" else data((5, 257), dtype)
    check_device(op, [x], axis=1)
    check_device(op, [x], axis=0, select_last_index=1)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_nan(op, last):
    x = data((3, 300), np.float32)
    x[0, 5] = x[0, 250] = x[2, 299] = np.nan
    check_device(op, [x], axis=1, select_last_index=last)
    check_device(op, [x.T.copy()], axis=0, select_last_index=last)


def _grad_inputs(op, shape, axes, keepdims, dtype=np.float32, ties=False):
    x = data(shape, np.float32)
    if ties:
        x = np.round(x * 2)
    ax = axes_input(axes)
    (y,) = run_op(op.removesuffix("Gradient"), [x, ax], keepdims=keepdims)
    dy = rand(*y.shape, seed=1).astype(dtype)
    return x, y, dy, ax


@pytest.mark.parametrize("op", ["ReduceSumGradient", "ReduceMeanGradient"])
@pytest.mark.parametrize("shape, axes", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_sum_mean_gradient(op, shape, axes, keepdims):
    x, _, dy, ax = _grad_inputs(op, shape, axes, keepdims)
    check_device(op, [dy, x, ax], keepdims=keepdims)


@pytest.mark.parametrize("op", ["ReduceSumGradient", "ReduceMeanGradient"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_reduce_sum_mean_gradient_dtypes(op, dtype):
    x, _, dy, ax = _grad_inputs(op, (3, 5, 7), [0, 2], 0, dtype)
    check_device(op, [dy, x, ax], keepdims=0, **tol(dtype))


@pytest.mark.parametrize("op", ["ReduceSumGradient", "ReduceMeanGradient", "ReduceMaxGradient"])
def test_reduce_gradient_noop(op):
    x = data((3, 4), np.float32)
    dy = rand(3, 4, seed=1)
    extra = [x] if op == "ReduceMaxGradient" else []
    check_device(op, [dy, x, *extra, np.zeros(0, np.int64)], noop_with_empty_axes=1)


@pytest.mark.parametrize("shape, axes", CASES)
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("ties", [False, True])
def test_reduce_max_gradient(shape, axes, keepdims, ties):
    x, y, dy, ax = _grad_inputs("ReduceMaxGradient", shape, axes, keepdims, ties=ties)
    check_device("ReduceMaxGradient", [dy, x, y, ax], keepdims=keepdims)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_reduce_max_gradient_dtypes(dtype):
    x, y, dy, ax = _grad_inputs("ReduceMaxGradient", (3, 50, 7), [1], 1, dtype, ties=True)
    check_device("ReduceMaxGradient", [dy, x, y, ax], **tol(dtype))
    xi, yi = x.astype(np.int32), y.astype(np.int32)
    check_device("ReduceMaxGradient", [dy, xi, yi, ax], **tol(dtype))


def test_reduce_min_gradient_op_is_reduce_max_gradient():
    x = np.round(data((6, 40), np.float32) * 2)
    ax = np.array([1], np.int64)
    (y,) = run_op("ReduceMin", [x, ax])
    check_device("ReduceMaxGradient", [rand(6, 1, seed=2), x, y, ax])
