"""GatherElements, GatherND, ScatterElements, ScatterND and TensorScatter against loops."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def ints(*values):
    return np.array(values, np.int64)


def rand_indices(shape, size, seed=0):
    """Indices in [-size, size), negative ones included."""
    return np.random.default_rng(seed).integers(-size, size, size=shape).astype(np.int64)


def gather_elements_ref(axis):
    def ref(data, indices):
        out = np.empty(indices.shape, data.dtype)
        for pos in np.ndindex(*indices.shape):
            src = list(pos)
            src[axis] = int(indices[pos]) % data.shape[axis]
            out[pos] = data[tuple(src)]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "shape, ishape, axis",
    [((3, 3), (2, 3), 0), ((3, 3), (3, 2), 1), ((2, 3, 4), (2, 2, 5), 2), ((4,), (6,), -1)],
)
def test_gather_elements(shape, ishape, axis):
    data = rand(*shape)
    idx = rand_indices(ishape, shape[axis])
    check_op("GatherElements", [data, idx], gather_elements_ref(axis), axis=axis)


def test_gather_elements_errors():
    with pytest.raises(OperatorError, match="out of range"):
        run_op("GatherElements", [rand(2, 2), ints(0, 2).reshape(1, 2)], axis=1)
    with pytest.raises(OperatorError, match="rank"):
        run_op("GatherElements", [rand(2, 2), ints(0, 1)])


def gather_nd_ref(batch_dims):
    def ref(data, indices):
        b = batch_dims
        k = indices.shape[-1]
        out_shape = indices.shape[:-1] + data.shape[b + k :]
        out = np.empty(out_shape, data.dtype)
        for pos in np.ndindex(*indices.shape[:-1]):
            where = tuple(pos[:b]) + tuple(int(i) for i in indices[pos])
            out[pos] = data[where]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "shape, indices, batch_dims",
    [
        ((2, 2), [[0, 0], [1, 1]], 0),
        ((2, 2), [[1], [0]], 0),
        ((2, 2, 2), [[0, 1], [1, 0]], 0),
        ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0),
        ((2, 2, 2), [[1], [0]], 1),
        ((2, 3, 4), [[[1, -1], [0, 2]], [[2, 0], [-3, 3]]], 1),
        ((2, 3, 4), [[[1], [2], [-1]], [[0], [1], [3]]], 2),
    ],
)
def test_gather_nd(shape, indices, batch_dims):
    data = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    check_op("GatherND", [data, np.array(indices, np.int64)], gather_nd_ref(batch_dims),
             batch_dims=batch_dims)  # fmt: skip


def test_gather_nd_errors():
    with pytest.raises(OperatorError, match="out of range"):
        run_op("GatherND", [rand(2, 2), ints(0, 2).reshape(1, 2)])
    with pytest.raises(OperatorError, match="indexable dims"):
        run_op("GatherND", [rand(2, 2), ints(0, 0, 0).reshape(1, 3)])


COMBINE = {
    "none": lambda a, b: b,
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": np.maximum,
    "min": np.minimum,
}


def scatter_elements_ref(axis, reduction):
    def ref(data, indices, updates):
        out = data.copy()
        for pos in np.ndindex(*indices.shape):
            dst = list(pos)
            dst[axis] = int(indices[pos]) % data.shape[axis]
            out[tuple(dst)] = COMBINE[reduction](out[tuple(dst)], updates[pos])
        return (out,)

    return ref


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize(
    "shape, ishape, axis", [((3, 3), (2, 3), 0), ((3, 4), (3, 2), 1), ((2, 3, 4), (2, 2, 4), -2)]
)
def test_scatter_elements(shape, ishape, axis, reduction):
    data = rand(*shape)
    if reduction == "none":  # distinct targets: with repeats the winner is unspecified
        idx = np.argsort(rand(*shape), axis=axis).take(range(ishape[axis]), axis=axis)
        idx = idx[tuple(slice(0, n) for n in ishape)]
    else:
        idx = rand_indices(ishape, shape[axis], seed=1)
    updates = rand(*ishape, seed=2)
    check_op("ScatterElements", [data, idx, updates], scatter_elements_ref(axis % 3, reduction),
             axis=axis, reduction=reduction)  # fmt: skip


def scatter_nd_ref(reduction):
    def ref(data, indices, updates):
        out = data.copy()
        for pos in np.ndindex(*indices.shape[:-1]):
            where = tuple(int(i) for i in indices[pos])
            out[where] = COMBINE[reduction](out[where], updates[pos])
        return (out,)

    return ref


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize(
    "indices",
    [
        [[4], [3], [1], [7]],
        [[0], [2]],
        [[0, 1], [2, 3], [1, 1]],
        [[1, 2, 3]],
        [[[0], [1]], [[2], [3]]],
    ],
)
def test_scatter_nd(indices, reduction):
    indices = np.array(indices, np.int64)
    data = rand(8, 4, 4)
    updates = rand(*(indices.shape[:-1] + data.shape[indices.shape[-1] :]), seed=3)
    check_op("ScatterND", [data, indices, updates], scatter_nd_ref(reduction), reduction=reduction)


def test_scatter_duplicates_accumulate():
    data, idx, upd = np.zeros(3, np.float32), ints(1, 1, 1), np.ones(3, np.float32)
    out = run_op("ScatterElements", [data, idx, upd], reduction="add")[0]
    np.testing.assert_array_equal(out, [0, 3, 0])
    out = run_op("ScatterND", [data, idx.reshape(3, 1), upd], reduction="add")[0]
    np.testing.assert_array_equal(out, [0, 3, 0])
    with pytest.raises(OperatorError, match="reduction"):
        run_op("ScatterND", [data, idx.reshape(3, 1), upd], reduction="sum")


def tensor_scatter_ref(axis, mode):
    def ref(past, update, write_indices=None):
        if write_indices is None:
            write_indices = np.zeros(past.shape[0], np.int64)
        out = past.copy()
        for prefix in np.ndindex(*past.shape[:axis]):
            for s in range(update.shape[axis]):
                t = int(write_indices[prefix[0]]) + s
                if mode == "circular":
                    t %= past.shape[axis]
                out[prefix + (t,)] = update[prefix + (s,)]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "past, update, starts, axis, mode",
    [
        ((2, 3, 5, 4), (2, 3, 2, 4), (1, 3), -2, "linear"),
        ((2, 3, 5, 4), (2, 3, 1, 4), None, 2, "linear"),
        ((2, 5, 4), (2, 3, 4), (0, 2), 1, "linear"),
        ((2, 3, 5, 4), (2, 3, 3, 4), (4, 1), -2, "circular"),
        ((3, 6), (3, 2), (5, 0, 3), 1, "circular"),
    ],
)
def test_tensor_scatter(past, update, starts, axis, mode):
    inputs = [rand(*past), rand(*update, seed=1)] + ([] if starts is None else [ints(*starts)])
    check_op("TensorScatter", inputs, tensor_scatter_ref(axis % len(past), mode),
             axis=axis, mode=mode)  # fmt: skip


def test_tensor_scatter_errors():
    with pytest.raises(OperatorError, match="run past"):
        run_op("TensorScatter", [rand(1, 4, 2), rand(1, 3, 2), ints(2)], axis=1)
    with pytest.raises(OperatorError, match="batch dimension"):
        run_op("TensorScatter", [rand(4, 2), rand(4, 2)], axis=0)
