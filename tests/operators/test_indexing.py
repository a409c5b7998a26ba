"""Slice, Gather and Pad against NumPy."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op

DTYPES = [np.float32, np.int64, np.bool_, object]
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def data(shape, dtype, seed=0):
    """Values of `dtype`; object arrays hold strings."""
    values = np.asarray(rand(*shape, dtype=np.float64, seed=seed, low=-5, high=5))
    if dtype is object:
        return np.asarray(np.round(values).astype(int).astype(str), dtype=object)
    if dtype is np.bool_:
        return values > 0
    return values.astype(dtype)


def i64(*values):
    return np.array(values, dtype=np.int64)


def reference_slice(x, starts, ends, axes=None, steps=None):
    """ONNX Slice written out: the selected indices per axis, then one fancy index."""
    axes = range(len(starts)) if axes is None else [a % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    picks = [np.arange(d) for d in x.shape]
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        dim = x.shape[axis]
        start, end = int(start) + (dim if start < 0 else 0), int(end) + (dim if end < 0 else 0)
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        picks[axis] = np.arange(start, end, step) if dim else np.arange(0)
    return (x[np.ix_(*picks)] if x.ndim else x,)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([1], [3], None, None),
        ([0, 1], [2, -1], None, None),
        ([1, 0], [2, 3], [0, 1], [1, 2]),
        ([-1], [-100], [1], [-1]),
        ([3, -2], [0, 1], [-1, 0], [-2, -1]),
        ([0], [INT64_MAX], [2], [2]),
        ([INT64_MAX], [INT64_MIN], [1], [-1]),
        ([-7], [-7], [1], [-1]),  # start clamps to 0, end to -1: one element, as ONNX says
        ([10], [20], [0], [1]),
        ([2, 2], [1, 1], [0, 2], [1, 1]),
        ([1], [1000], [-2], [3]),
    ],
)
def test_slice(starts, ends, axes, steps, dtype):
    inputs = [data((3, 4, 5), dtype), i64(*starts), i64(*ends)]
    inputs += [None if axes is None else i64(*axes), None if steps is None else i64(*steps)]
    if steps is None:
        inputs = inputs[:4] if axes is not None else inputs[:3]
    check_op("Slice", inputs, reference=reference_slice)


def test_slice_int32_inputs():
    x = data((4, 6), np.float32)
    starts, ends = np.array([1, -4], np.int32), np.array([3, 5], np.int32)
    check_op("Slice", [x, starts, ends], reference=lambda x, s, e: (x[1:3, -4:5],))


def test_slice_errors():
    x = rand(3, 4)
    with pytest.raises(OperatorError, match=r"'steps' \[0\] holds a 0 step"):
        run_op("Slice", [x, i64(0), i64(1), i64(0), i64(0)])
    with pytest.raises(OperatorError, match="input 'ends' has 2 entries, expected 1"):
        run_op("Slice", [x, i64(0), i64(1, 2)])
    with pytest.raises(OperatorError, match=r"axis 2 is out of range \[-2, 1\]"):
        run_op("Slice", [x, i64(0), i64(1), i64(2)])
    with pytest.raises(OperatorError, match="repeat an axis"):
        run_op("Slice", [x, i64(0, 0), i64(1, 1), i64(1, -1)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, indices, axis",
    [
        ((5, 3), [0, 4, -1, 2], 0),
        ((5, 3), [[0, 1], [-3, 2]], 1),
        ((2, 3, 4), 3, -1),
        ((2, 3, 4), [], 1),
        ((4,), [[[-4]]], 0),
    ],
)
def test_gather(shape, indices, axis, dtype):
    def reference(x, idx):
        dim = x.shape[axis]
        fixed = np.where(idx < 0, idx + dim, idx)
        out = np.moveaxis(x, axis, 0)[fixed]
        # Indexing put the index dims first; move them back to where axis was.
        k = axis % x.ndim
        order = list(range(fixed.ndim, fixed.ndim + k)) + list(range(fixed.ndim))
        order += list(range(fixed.ndim + k, out.ndim))
        return (out.transpose(order),)

    idx = np.array(indices, dtype=np.int64)
    check_op("Gather", [data(shape, dtype), idx], reference=reference, axis=axis)
    check_op("Gather", [data(shape, dtype), idx.astype(np.int32)], reference=reference, axis=axis)


def test_gather_errors():
    with pytest.raises(OperatorError, match=r"'indices' holds 5, out of range \[-5, 4\]"):
        run_op("Gather", [rand(5, 2), i64(0, 5)])
    with pytest.raises(OperatorError, match=r"'indices' has dtype float32, expected a int type"):
        run_op("Gather", [rand(5, 2), rand(2)])


def reference_pad(x, pads, value=None, axes=None, mode="constant"):
    """Pads by hand: crop negatives, then index each axis through a source-index map."""
    axes = range(x.ndim) if axes is None else [a % x.ndim for a in axes]
    n = len(pads) // 2
    width = [(0, 0)] * x.ndim
    for i, axis in enumerate(axes):
        width[axis] = (int(pads[i]), int(pads[n + i]))
    x = x[
        tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(x.shape, width, strict=True))
    ]
    width = [(max(b, 0), max(e, 0)) for b, e in width]
    if mode == "constant":
        fill = value if value is not None else ("" if x.dtype == object else x.dtype.type(0))
        out = np.full(
            [d + b + e for d, (b, e) in zip(x.shape, width, strict=True)], fill, dtype=x.dtype
        )
        out[tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, width, strict=True))] = x
        return (out,)
    maps = []
    for d, (b, e) in zip(x.shape, width, strict=True):
        pos = np.arange(-b, d + e)
        if mode == "edge":
            src = np.clip(pos, 0, d - 1)
        elif mode == "wrap":
            src = pos % d
        else:  # reflect: period 2(d-1), mirrored without repeating the edge
            period = max(2 * (d - 1), 1)
            src = np.abs(pos) % period
            src = np.where(src >= d, period - src, src)
        maps.append(src)
    return (x[np.ix_(*maps)],)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize(
    "shape, pads, axes",
    [
        ((3, 4), [0, 2, 0, 0], None),
        ((3, 4), [2, 1, 1, 3], None),
        ((2, 3, 4), [1, 0, 2, 0, 1, 1], None),
        ((2, 3, 4), [2, 1], [-1]),
        ((2, 3, 4), [1, 0, 0, 2], [2, 0]),
        ((3, 5), [-1, 1, 1, -2], None),
        ((3, 4), [0, 0, 0, 0], None),
    ],
)
def test_pad(shape, pads, axes, mode, dtype):
    x = data(shape, dtype)
    inputs = [x, i64(*pads)] + ([] if axes is None else [None, i64(*axes)])
    check_op(
        "Pad",
        inputs,
        reference=lambda x, p, *rest: reference_pad(x, pads, None, axes, mode),
        mode=mode,
    )


@pytest.mark.parametrize(
    "x, value",
    [
        (rand(2, 3), np.array(2.5, np.float32)),
        (np.arange(6, dtype=np.int64).reshape(2, 3), np.array([7], np.int64)),
        (np.array([True, False]), np.array(True)),
        (np.array(["a", "b"], dtype=object), np.array("pad", dtype=object)),
    ],
)
def test_pad_constant_value(x, value):
    pads = i64(*([1] * (2 * x.ndim)))
    check_op(
        "Pad",
        [x, pads, value],
        reference=lambda x, p, v: reference_pad(x, p, v.reshape(()).item()),
    )


def test_pad_errors():
    with pytest.raises(OperatorError, match="'pads' has 2 entries, expected 4"):
        run_op("Pad", [rand(2, 3), i64(1, 1)])
    with pytest.raises(OperatorError, match="mode 'foo' is not one of constant, reflect"):
        run_op("Pad", [rand(2, 3), i64(1, 1, 1, 1)], mode="foo")
    with pytest.raises(OperatorError, match="crop more than data"):
        run_op("Pad", [rand(2, 3), i64(-2, 0, -1, 0)])
    with pytest.raises(OperatorError, match="mode 'edge' cannot pad axis 0, which is empty"):
        run_op("Pad", [rand(0, 3), i64(1, 0, 0, 0)], mode="edge")
