"""CUDA data movement (shape_ops) against the NumPy kernels: every dtype, odd sizes,
negative axes and steps, empty tensors."""

import numpy as np
import pytest

from netbrew.testing import check_device, rand

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.bool_]


def data(shape, dtype=np.float32, seed=0):
    x = rand(*shape, seed=seed, low=-50, high=50)
    return (x > 0) if dtype == np.bool_ else x.astype(dtype)


def ints(*values):
    return np.array(values, np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, new, allowzero",
    [
        ((2, 3, 4), [4, -1], 0),
        ((2, 3, 4), [0, 12], 0),
        ((5,), [5, 1, 1], 0),
        ((0, 3), [3, 0], 1),
        ((0, 3), [-1, 3], 0),
    ],
)
def test_reshape(dtype, shape, new, allowzero):
    check_device("Reshape", [data(shape, dtype), ints(*new)], allowzero=allowzero)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_flatten(axis, dtype):
    check_device("Flatten", [data((2, 3, 5), dtype)], axis=axis)


@pytest.mark.parametrize("axes", [None, [0], [-3, 0], [3]])
def test_squeeze(axes):
    inputs = [data((1, 3, 1, 1, 5))] + ([] if axes is None else [ints(*axes)])
    check_device("Squeeze", inputs)


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [0, -1]])
@pytest.mark.parametrize("shape", [(3, 5), (0, 2)])
def test_unsqueeze(axes, shape):
    check_device("Unsqueeze", [data(shape, np.int32), ints(*axes)])


@pytest.mark.parametrize("op", ["Identity", "StopGradient", "Alias", "Copy", "EnsureCPUOutput"])
@pytest.mark.parametrize("shape", [(0,), (7,), (2, 3, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pass_through_and_copies(op, shape, dtype):
    check_device(op, [data(shape, dtype)])


@pytest.mark.parametrize(
    "shape, perm",
    [
        ((2, 3), None),
        ((2, 3, 5), [1, 0, 2]),
        ((2, 3, 5, 7), [3, 1, 0, 2]),
        ((4, 1, 3), [2, 1, 0]),
        ((33, 65), [1, 0]),
        ((2, 3, 1, 4, 5, 2, 3), [6, 0, 5, 1, 4, 2, 3]),
        ((0, 3), [1, 0]),
        ((5,), [0]),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(shape, perm, dtype):
    attrs = {} if perm is None else {"perm": perm}
    check_device("Transpose", [data(shape, dtype)], **attrs)


SLICES = [
    ([1], [4], None, None),
    ([0, 2], [5, -1], [0, 2], None),
    ([-1], [-100], [-1], [-2]),  # negative step on a negative axis, clamped
    ([4, 6], [0, 0], [0, 1], [-1, -3]),
    ([1, 0, 2], [100, 7, 9], [1, 0, 2], [2, 3, 4]),
    ([3], [3], [2], None),  # empty result
    ([2], [1], [0], [1]),  # empty result: start past end
]


@pytest.mark.parametrize("starts, ends, axes, steps", SLICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_slice(starts, ends, axes, steps, dtype):
    inputs = [data((5, 7, 9), dtype), ints(*starts), ints(*ends)]
    inputs += [None if axes is None else ints(*axes)]
    inputs += [] if steps is None else [ints(*steps)]
    check_device("Slice", inputs)


@pytest.mark.parametrize("starts, ends, axes, steps", SLICES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_slice_gradient(starts, ends, axes, steps, dtype):
    from netbrew.testing import run_op

    x = data((5, 7, 9), dtype)
    index = [ints(*starts), ints(*ends), None if axes is None else ints(*axes)]
    index += [] if steps is None else [ints(*steps)]
    (y,) = run_op("Slice", [x, *index])
    check_device("SliceGradient", [rand(*y.shape, seed=3).astype(dtype), x, *index])


@pytest.mark.parametrize(
    "shape, to",
    [((3, 1), [2, 1, 6]), ((1,), [4]), ((2, 3), [1, 1]), ((4, 1, 5), [3, 5]), ((0, 1), [0, 4])],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_expand(shape, to, dtype):
    check_device("Expand", [data(shape, dtype), ints(*to)])


TILES = [((2, 3), [2, 3]), ((1, 4, 1), [3, 1, 2]), ((2, 3), [0, 1]), ((5,), [1]), ((0, 2), [3, 1])]


@pytest.mark.parametrize("shape, reps", TILES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tile(shape, reps, dtype):
    check_device("Tile", [data(shape, dtype), ints(*reps)])


@pytest.mark.parametrize("shape, reps", TILES + [((3, 1, 2), [1, 5, 2])])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_tile_gradient(shape, reps, dtype):
    out = tuple(d * r for d, r in zip(shape, reps))
    tol = 1e-2 if dtype == np.float16 else 1e-5
    dy = rand(*out, seed=2).astype(dtype)
    check_device("TileGradient", [dy, data(shape, dtype), ints(*reps)], atol=tol, rtol=tol)


@pytest.mark.parametrize(
    "shapes, axis",
    [
        ([(2, 3), (2, 5), (2, 0)], 1),
        ([(2, 3), (2, 5)], -1),
        ([(1, 4), (3, 4), (2, 4)], 0),
        ([(2, 3, 4), (2, 1, 4), (2, 2, 4)], -2),
        ([(0, 3), (0, 3)], 0),
        ([(5,)], 0),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_concat(shapes, axis, dtype):
    inputs = [data(s, dtype, seed=k) for k, s in enumerate(shapes)]
    check_device("Concat", inputs, axis=axis)


@pytest.mark.parametrize(
    "shape, split, axis, outputs",
    [
        ((7, 4), [2, 5], 0, 2),
        ((7, 4), None, 0, 3),
        ((3, 4), [1, 3], -1, 2),
        ((3, 4), [0, 4], 1, 2),
        ((2, 3, 5), None, 1, 3),
    ],
)
@pytest.mark.parametrize("dtype", DTYPES)
def test_split(shape, split, axis, outputs, dtype):
    inputs = [data(shape, dtype)] + ([] if split is None else [ints(*split)])
    check_device("Split", inputs, outputs=outputs, axis=axis)


@pytest.mark.parametrize("missing", [None, 0, 1])
@pytest.mark.parametrize("axis", [1, -1])
def test_split_gradient(missing, axis):
    x = data((3, 7))
    dys = [rand(3, 2, seed=1), rand(3, 5, seed=2)]
    if missing is not None:
        dys[missing] = None
    check_device("SplitGradient", [x, ints(2, 5), *dys], axis=axis)


@pytest.mark.parametrize("start, end", [(0, None), (1, None), (-2, None), (0, -1), (5, None)])
@pytest.mark.parametrize("shape", [(2, 3, 5), (0, 4)])
def test_shape(start, end, shape):
    attrs = {"start": start} | ({} if end is None else {"end": end})
    check_device("Shape", [data(shape)], **attrs)


@pytest.mark.parametrize("shape", [(3, 4, 5), (0, 7), (1,)])
def test_size(shape):
    check_device("Size", [data(shape, np.float16)])
