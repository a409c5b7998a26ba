"""SpaceToDepth, DepthToSpace, CenterCropPad and Col2Im against loops."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def space_to_depth_ref(bs, mode):
    def ref(x):
        n, c, h, w = x.shape
        out = np.empty((n, c * bs * bs, h // bs, w // bs), x.dtype)
        for b, ch, i, j in np.ndindex(*x.shape):
            di, dj = i % bs, j % bs
            depth = (di * bs + dj) * c + ch if mode == "DCR" else (ch * bs + di) * bs + dj
            out[b, depth, i // bs, j // bs] = x[b, ch, i, j]
        return (out,)

    return ref


def depth_to_space_ref(bs, mode):
    def ref(x):
        n, c, h, w = x.shape
        oc = c // (bs * bs)
        out = np.empty((n, oc, h * bs, w * bs), x.dtype)
        for b, ch, i, j in np.ndindex(*out.shape):
            di, dj = i % bs, j % bs
            depth = (di * bs + dj) * oc + ch if mode == "DCR" else (ch * bs + di) * bs + dj
            out[b, ch, i, j] = x[b, depth, i // bs, j // bs]
        return (out,)

    return ref


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 2, 4, 6), 2), ((2, 3, 3, 6), 3), ((1, 1, 2, 2), 1)])
def test_space_to_depth(shape, bs, mode):
    check_op("SpaceToDepth", [rand(*shape)], space_to_depth_ref(bs, mode), blocksize=bs, mode=mode)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape, bs", [((1, 8, 2, 3), 2), ((2, 18, 1, 2), 3), ((1, 1, 2, 2), 1)])
def test_depth_to_space(shape, bs, mode):
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    check_op("DepthToSpace", [x], depth_to_space_ref(bs, mode), blocksize=bs, mode=mode)


def test_block_errors():
    with pytest.raises(OperatorError, match="multiples"):
        run_op("SpaceToDepth", [rand(1, 1, 3, 4)], blocksize=2)
    with pytest.raises(OperatorError, match="multiple of blocksize"):
        run_op("DepthToSpace", [rand(1, 3, 2, 2)], blocksize=2)
    with pytest.raises(OperatorError, match="mode"):
        run_op("DepthToSpace", [rand(1, 4, 2, 2)], blocksize=2, mode="XYZ")


def center_crop_pad_ref(axes):
    def ref(x, shape):
        dims = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
        target = list(x.shape)
        for d, s in zip(dims, shape.tolist()):
            target[d] = s
        out = np.zeros(target, x.dtype)
        for pos in np.ndindex(*target):
            src = []
            for d, p in enumerate(pos):
                src.append(p - (target[d] - x.shape[d]) // 2 if target[d] > x.shape[d]
                           else p + (x.shape[d] - target[d]) // 2)  # fmt: skip
            if all(0 <= s < n for s, n in zip(src, x.shape)):
                out[pos] = x[tuple(src)]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "shape, target, axes",
    [
        ((20, 10, 3), (10, 7, 3), None),
        ((10, 7, 3), (20, 10, 3), None),
        ((20, 8, 3), (10, 10, 3), None),
        ((3, 20, 10), (10, 9), [1, 2]),
        ((20, 10, 3), (10, 9), [-3, -2]),
        ((5, 4), (4,), [0]),
    ],
)
def test_center_crop_pad(shape, target, axes):
    x = rand(*shape)
    attrs = {} if axes is None else {"axes": axes}
    check_op("CenterCropPad", [x, np.array(target, np.int64)], center_crop_pad_ref(axes), **attrs)


def test_center_crop_pad_wrong_count():
    with pytest.raises(OperatorError, match="one per axis"):
        run_op("CenterCropPad", [rand(2, 3), np.array([1], np.int64)])


def col2im_ref(image, block, dilations, pads, strides):
    def ref(x, *_):
        nd = len(image)
        n, ck, _ = x.shape
        k = int(np.prod(block))
        c = ck // k
        counts = [
            (image[d] + pads[d] + pads[d + nd] - dilations[d] * (block[d] - 1) - 1) // strides[d]
            + 1
            for d in range(nd)
        ]
        out = np.zeros((n, c, *image), x.dtype)
        cols = x.reshape(n, c, k, -1)
        for kk, off in enumerate(np.ndindex(*block)):
            for ll, blk in enumerate(np.ndindex(*counts)):
                pos = [blk[d] * strides[d] - pads[d] + off[d] * dilations[d] for d in range(nd)]
                if all(0 <= p < s for p, s in zip(pos, image)):
                    out[(slice(None), slice(None), *pos)] += cols[:, :, kk, ll]
        return (out,)

    return ref


@pytest.mark.parametrize(
    "n, c, image, block, dilations, pads, strides",
    [
        (1, 1, [5, 5], [1, 5], [1, 1], [0, 0, 0, 0], [1, 1]),
        (2, 3, [5, 5], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
        (1, 2, [5, 5], [2, 2], [1, 1], [0, 0, 0, 0], [2, 2]),
        (1, 1, [6, 6], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),
        (1, 1, [5, 5], [2, 2], [1, 1], [1, 0, 1, 2], [2, 1]),
        (1, 2, [3, 4, 5], [1, 2, 2], [1, 1, 1], [0] * 6, [1, 1, 2]),
    ],
)
def test_col2im(n, c, image, block, dilations, pads, strides):
    nd = len(image)
    counts = [
        (image[d] + pads[d] + pads[d + nd] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
        for d in range(nd)
    ]
    x = rand(n, c * int(np.prod(block)), int(np.prod(counts)))
    inputs = [x, np.array(image, np.int64), np.array(block, np.int64)]
    check_op("Col2Im", inputs, col2im_ref(image, block, dilations, pads, strides),
             dilations=dilations, pads=pads, strides=strides)  # fmt: skip


def test_col2im_wrong_block_count():
    with pytest.raises(OperatorError, match="blocks"):
        run_op("Col2Im", [rand(1, 4, 7), np.array([4, 4], np.int64), np.array([2, 2], np.int64)])
