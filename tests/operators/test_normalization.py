"""BatchNormalization, LayerNormalization and Dropout against NumPy references written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand, run_op


def bn_inputs(shape, dtype):
    c = shape[1] if len(shape) > 1 else 1
    x = rand(*shape, dtype=dtype, seed=1, low=-3, high=3)
    scale, b, mean = (rand(c, dtype=dtype, seed=s) for s in (2, 3, 4))
    var = rand(c, dtype=dtype, seed=5, low=0.1, high=2.0)
    return [x, scale, b, mean, var]


def ref_batch_norm(x, scale, b, mean, var, epsilon=1e-5, momentum=0.9, training_mode=0):
    c = x.shape[1] if x.ndim > 1 else 1
    shape = (c,) + (1,) * max(x.ndim - 2, 0)
    x64 = x.astype(np.float64)
    if training_mode:
        axes = (0,) + tuple(range(2, x.ndim))
        use_mean = x64.mean(axis=axes)
        use_var = ((x64 - x64.mean(axis=axes, keepdims=True)) ** 2).mean(axis=axes)
    else:
        use_mean, use_var = mean.astype(np.float64), var.astype(np.float64)
    y = (x64 - use_mean.reshape(shape)) / np.sqrt(use_var.reshape(shape) + epsilon)
    y = (y * scale.reshape(shape) + b.reshape(shape)).astype(x.dtype)
    if not training_mode:
        return (y,)
    running_mean = mean * momentum + use_mean * (1 - momentum)
    running_var = var * momentum + use_var * (1 - momentum)
    return y, running_mean.astype(mean.dtype), running_var.astype(var.dtype)


@pytest.mark.parametrize("shape", [(6,), (4, 3), (2, 3, 5), (2, 3, 4, 5), (2, 2, 3, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "attrs", [{}, {"epsilon": 1e-3}, {"training_mode": 1}, {"training_mode": 1, "momentum": 0.5}]
)
def test_batch_normalization(shape, dtype, attrs):
    check_op(
        "BatchNormalization",
        bn_inputs(shape, dtype),
        reference=lambda *a: ref_batch_norm(*a, **attrs),
        atol=1e-4,
        rtol=1e-4,
        **attrs,
    )


def ref_layer_norm(x, scale, b=None, axis=-1, epsilon=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x32 = x.astype(np.float32)
    mean = x32.mean(axis=axes, keepdims=True)
    var = ((x32 - mean) ** 2).mean(axis=axes, keepdims=True)
    inv_std = (1.0 / np.sqrt(var + epsilon)).astype(np.float32)
    y = ((x32 - mean) * inv_std).astype(x.dtype) * scale
    if b is not None:
        y = y + b
    return y.astype(x.dtype), mean, inv_std


@pytest.mark.parametrize(
    "shape, axis, param_shape",
    [
        ((5,), -1, (5,)),
        ((3, 4), -1, (4,)),
        ((2, 3, 4), 1, (3, 4)),
        ((2, 3, 4), -2, (1, 4)),
        ((2, 3, 4), 0, (2, 3, 4)),
        ((2, 3, 2, 2), 2, (2, 2)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(shape, axis, param_shape, dtype, with_bias):
    x = rand(*shape, dtype=dtype, seed=1, low=-3, high=3)
    scale = rand(*param_shape, dtype=dtype, seed=2)
    b = rand(*param_shape, dtype=dtype, seed=3) if with_bias else None
    check_op(
        "LayerNormalization",
        [x, scale, b],
        reference=lambda x, s, b: ref_layer_norm(x, s, b, axis=axis, epsilon=1e-4),
        axis=axis,
        epsilon=1e-4,
    )


@pytest.mark.parametrize("shape", [(3,), (4, 5), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(
    "extra", [[], [np.array(0.3, np.float32)], [np.array(0.7, np.float32), np.array(False)]]
)
def test_dropout_inference_is_identity(shape, dtype, extra):
    x = rand(*shape, dtype=dtype)
    check_op("Dropout", [x, *extra], reference=lambda x, *_: (x, np.ones(x.shape, bool)))


@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dropout_training(ratio, dtype):
    x = rand(200, 500, dtype=dtype, low=0.5, high=1.5)
    out, mask = run_op("Dropout", [x, np.array(ratio, dtype), np.array(True)], outputs=2)
    assert out.dtype == x.dtype and mask.dtype == np.bool_ and out.shape == x.shape
    np.testing.assert_allclose(out, np.where(mask, x / (1 - ratio), 0), rtol=1e-6)
    assert abs(mask.mean() - (1 - ratio)) < 0.01


def test_dropout_seed_is_repeatable():
    x = rand(50, 50)
    feeds = [x, np.array(0.5, np.float32), np.array(True)]
    first = run_op("Dropout", feeds, outputs=2, seed=7)
    second = run_op("Dropout", feeds, outputs=2, seed=7)
    other = run_op("Dropout", feeds, outputs=2, seed=8)
    np.testing.assert_array_equal(first[1], second[1])
    assert (first[1] != other[1]).any()


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("BatchNormalization", [rand(2, 3, 4)] + [rand(4)] * 4, {}, r"input scale has shape \[4\]"),
        ("BatchNormalization", [np.float32(1.0)] + [rand(1)] * 4, {}, "input X is a scalar"),
        ("LayerNormalization", [rand(2, 3), rand(2)], {}, r"Scale has shape \[2\]"),
        ("LayerNormalization", [rand(2, 3), rand(3)], {"axis": 2}, "axis=2 is out of range"),
        ("LayerNormalization", [rand(2, 3), rand(3)], {"stash_type": 7}, "stash_type=7"),
        (
            "Dropout",
            [rand(3), np.array(1.0), np.array(True)],
            {},
            r"ratio is 1.0, expected .*\[0, 1\)",
        ),
        ("Dropout", [rand(3), rand(2)], {}, r"input ratio has shape \[2\], expected a scalar"),
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        run_op(op, inputs, **attrs)
