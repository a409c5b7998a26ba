"""CUDA Gather and GatherGradient against the NumPy kernels."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import check_device, rand

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.bool_]

CASES = [
    ((5, 4), [0, 4, -1, 2], 0),
    ((5, 4), [[3, 3], [-4, 0]], 1),
    ((2, 7, 3), [6, 0, -7, 6, 6], -2),
    ((2, 7, 3), [[1], [2]], -1),
    ((3, 4), [], 0),
    ((0, 4), [1, 0], 1),
    ((9,), [8, 8, 0], 0),
]


def data(shape, dtype=np.float32):
    x = rand(*shape, low=-50, high=50)
    return (x > 0) if dtype == np.bool_ else x.astype(dtype)


@pytest.mark.parametrize("shape, indices, axis", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_gather(shape, indices, axis, dtype, index_dtype):
    check_device("Gather", [data(shape, dtype), np.array(indices, index_dtype)], axis=axis)


def test_gather_out_of_range_is_an_error_naming_the_op():
    ws = Workspace()
    ws.feed_blob("x", data((5, 2)), device="cuda:0")
    ws.feed_blob("i", np.array([0, 5], np.int64), device="cuda:0")
    with pytest.raises(OperatorError, match="Gather: input 'indices' holds 5"):
        ws.run_operator_once(op_def("Gather", ["x", "i"], ["y"], device="cuda:0"))


@pytest.mark.parametrize("shape, indices, axis", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_gather_gradient(shape, indices, axis, dtype):
    idx = np.array(indices, np.int64)
    rank = len(shape)
    a = axis % rank
    out = shape[:a] + idx.shape + shape[a + 1 :]
    dy = rand(*out, seed=1).astype(dtype)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    check_device("GatherGradient", [dy, data(shape, dtype), idx], axis=axis, atol=tol, rtol=tol)
