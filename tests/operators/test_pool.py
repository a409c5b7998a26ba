"""Pooling ops against loop-based NumPy references written here."""

import functools
import math

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.testing import check_op, rand


def pool_geometry(in_shape, kernel_shape, auto_pad, ceil_mode, dilations, pads, strides):
    """(begin pads, end pads, output shape) by the ONNX pooling formulas."""
    n = len(in_shape)
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    span = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(i / s) for i, s in zip(in_shape, strides)]
        total = [max(0, (o - 1) * s + k - i) for o, s, k, i in zip(out, strides, span, in_shape)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        return begin, [t - b for t, b in zip(total, begin)], out, strides, dilations
    pads = pads if pads and auto_pad == "NOTSET" else [0] * (2 * n)
    out = []
    for a in range(n):
        room = (in_shape[a] + pads[a] + pads[a + n] - span[a]) / strides[a]
        size = math.floor(room) + 1
        if ceil_mode and auto_pad == "NOTSET":
            size = math.ceil(room) + 1
            if (size - 1) * strides[a] >= in_shape[a] + pads[a]:  # starts in the end padding
                size -= 1
        out.append(size)
    return pads[:n], pads[n:], out, strides, dilations


def pool_ref(
    x,
    mode,
    *,
    kernel_shape,
    auto_pad="NOTSET",
    ceil_mode=0,
    count_include_pad=0,
    dilations=None,
    pads=None,
    strides=None,
    storage_order=0,
):
    n = x.ndim - 2
    begin, end, out, strides, dilations = pool_geometry(
        x.shape[2:], kernel_shape, auto_pad, ceil_mode, dilations, pads, strides
    )
    y = np.zeros((*x.shape[:2], *out), dtype=x.dtype)
    indices = np.zeros(y.shape, dtype=np.int64)
    order = "F" if storage_order else "C"
    for o in np.ndindex(*out):
        axes, counted = [], 1
        for a in range(n):
            pos = o[a] * strides[a] - begin[a] + np.arange(kernel_shape[a]) * dilations[a]
            axes.append(pos[(pos >= 0) & (pos < x.shape[2 + a])])
            counted *= np.sum((pos >= -begin[a]) & (pos < x.shape[2 + a] + end[a]))
        grid = np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")])  # (n, P)
        values = x[(slice(None), slice(None), *grid)]  # (N, C, P)
        if mode == "max":
            best = values.argmax(axis=-1)
            y[(..., *o)] = values.max(axis=-1)
            spatial = np.ravel_multi_index(grid[:, best], x.shape[2:], order=order)
            base = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[:2]) * math.prod(x.shape[2:])
            indices[(..., *o)] = base + spatial
        else:
            divisor = counted if count_include_pad else values.shape[-1]
            y[(..., *o)] = values.sum(axis=-1) / divisor
    return y, indices


# (X shape, attrs) shared by MaxPool and AveragePool.
CASES = {
    "1d": ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 2])),
    "2d": ((2, 3, 6, 7), dict(kernel_shape=[3, 3])),
    "2d_stride_asymmetric_pads": (
        (2, 2, 7, 8),
        dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1]),
    ),
    "2d_dilation": (
        (1, 2, 8, 7),
        dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[2, 2], pads=[1, 1, 1, 1]),
    ),
    "2d_ceil": ((2, 3, 7, 8), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "2d_ceil_pads": (
        (1, 2, 6, 6),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1),
    ),
    "2d_ceil_drop_last": (
        (1, 2, 5, 5),
        dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    ),
    "2d_ceil_long_tail": (
        (1, 1, 6, 5),
        dict(kernel_shape=[4, 3], strides=[3, 3], pads=[0, 0, 1, 0], ceil_mode=1),
    ),
    "2d_same_upper": (
        (2, 3, 7, 8),
        dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    ),
    "2d_same_lower": (
        (2, 3, 7, 8),
        dict(kernel_shape=[2, 2], strides=[2, 3], auto_pad="SAME_LOWER"),
    ),
    "2d_valid": ((2, 3, 7, 8), dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="VALID")),
    "3d": (
        (1, 2, 5, 6, 4),
        dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 0]),
    ),
    # one window over the whole image (AveragePool takes a plain reduction), then with an
    # end pad that still leaves a single window
    "2d_whole_image": ((2, 3, 5, 4), dict(kernel_shape=[5, 4], strides=[1, 1])),
    "2d_whole_image_end_pad": (
        (1, 2, 4, 4),
        dict(kernel_shape=[4, 4], strides=[3, 3], pads=[0, 0, 1, 2]),
    ),
    # kernel as big as the image, but dilated: its one window skips every other column
    "2d_whole_image_dilated": (
        (1, 2, 1, 4),
        dict(kernel_shape=[1, 4], dilations=[1, 2], pads=[0, 0, 0, 3]),
    ),
    "3d_ceil_dilation": (
        (1, 2, 6, 5, 5),
        dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[1, 2, 1], ceil_mode=1),
    ),
}


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_max_pool(case, dtype, storage_order):
    x_shape, attrs = CASES[case]
    attrs = {**attrs, "storage_order": storage_order}
    check_op(
        "MaxPool",
        [rand(*x_shape, dtype=dtype)],
        reference=lambda x: pool_ref(x, "max", **attrs),
        **attrs,
    )


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pool_integers(dtype):
    x = np.random.default_rng(0).integers(0, 100, size=(2, 2, 5, 6)).astype(dtype)
    attrs = dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 1, 1])
    check_op("MaxPool", [x], reference=lambda x: pool_ref(x, "max", **attrs), **attrs)


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_average_pool(case, dtype, count_include_pad):
    x_shape, attrs = CASES[case]
    attrs = {**attrs, "count_include_pad": count_include_pad}
    check_op(
        "AveragePool",
        [rand(*x_shape, dtype=dtype)],
        reference=lambda x: pool_ref(x, "avg", **attrs)[:1],
        **attrs,
    )


@pytest.mark.parametrize("op, fn", [("GlobalAveragePool", np.mean), ("GlobalMaxPool", np.max)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 2)])
def test_global_pool(op, fn, dtype, shape):
    def reference(x):
        y = np.empty((*x.shape[:2], *(1,) * (x.ndim - 2)), dtype=x.dtype)
        for n, c in np.ndindex(*x.shape[:2]):
            y[n, c] = fn(x[n, c])
        return (y,)

    check_op(op, [rand(*shape, dtype=dtype)], reference=reference)


@pytest.mark.parametrize(
    "op, x_shape, attrs, message",
    [
        ("MaxPool", (1, 3, 5), dict(kernel_shape=[2, 2]), r"3 dims, expected 4 \(N, C, H, W\)"),
        ("AveragePool", (1, 3, 2, 5), dict(kernel_shape=[3, 3]), "smaller than the window span 3"),
        ("AveragePool", (1, 3, 5, 5), dict(kernel_shape=[2, 2], pads=[1]), "'pads' has 1 values"),
        ("MaxPool", (1, 3, 5, 5), dict(kernel_shape=[2, 2], strides=[0, 1]), "must be >= 1"),
        ("GlobalMaxPool", (2, 3), {}, "expected at least 3"),
    ],
)
def test_pool_errors(op, x_shape, attrs, message):
    with pytest.raises(OperatorError, match=message):
        check_op(op, [rand(*x_shape)], reference=lambda x: (x,), **attrs)


def test_pool_requires_kernel_shape():
    with pytest.raises(SchemaError, match="'kernel_shape' is missing"):
        check_op("AveragePool", [rand(1, 1, 3, 3)], reference=lambda x: (x,))


@pytest.mark.parametrize("ufunc", [np.maximum, np.add])
@pytest.mark.parametrize(
    "shape, kernel, strides, dilations, pads, ceil",
    [
        ((2, 3, 9, 11), (3, 2), (2, 1), (1, 2), [1, 0, 1, 1], False),
        ((1, 2, 5, 6, 7), (2, 3, 2), (1, 2, 3), (2, 1, 1), [0, 1, 1, 1, 0, 1], True),
        ((1, 4, 10), (4,), (3,), (1,), [2, 1], True),
        ((1, 2, 4, 5), (2, 2), (1, 2), (1, 1), [3, 0, 3, 3], False),  # windows all padding
    ],
)
@pytest.mark.parametrize("channels_last", [False, True])
def test_window_reduce_matches_all_offsets(
    ufunc, shape, kernel, strides, dilations, pads, ceil, channels_last
):
    from netbrew.operators.window import make_window, window_reduce, window_slices

    x = np.random.default_rng(3).standard_normal(shape)
    if channels_last:  # the in-place path: the padding is never materialised
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
    win = make_window(shape[2:], kernel, strides, dilations, pads, ceil_mode=ceil)
    slices = window_slices(x, win, -7.0)
    want = functools.reduce(ufunc, slices[1:], slices[0].copy())
    np.testing.assert_allclose(window_reduce(x, win, ufunc, -7.0), want, rtol=1e-12)
