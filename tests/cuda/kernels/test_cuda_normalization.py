"""CUDA normalizations (normalization.cu) against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.testing import check_device, rand, run_op

# Empty batches and empty normalized sets give NaN statistics, with NumPy's warnings.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Mean of empty slice", "ignore:invalid value", "ignore:divide by zero",
    "ignore:Degrees of freedom",
)  # fmt: skip

TOL = {
    np.float32: {"atol": 1e-5, "rtol": 1e-4},
    np.float16: {"atol": 1e-2, "rtol": 1e-2},
    np.float64: {"atol": 1e-10, "rtol": 1e-10},
}


def x_of(shape, dtype=np.float32, seed=0):
    return (rand(*shape, seed=seed) * 3 + 0.5).astype(dtype)


def channel_params(c, dtype=np.float32):
    scale = rand(c, seed=1, low=0.5, high=1.5).astype(dtype)
    bias = rand(c, seed=2).astype(dtype)
    mean = rand(c, seed=3).astype(dtype)
    var = rand(c, seed=4, low=0.5, high=2).astype(dtype)
    return [scale, bias, mean, var]


# -- BatchNormalization ---------------------------------------------------------------------------

BN_SHAPES = [(0, 3), (1, 1), (7,), (2, 3), (4, 3, 5), (2, 5, 7, 9), (3, 2, 257), (300, 4),
             (0, 2, 5), (2, 0, 4)]  # fmt: skip


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("training", [0, 1])
def test_batch_normalization(shape, training):
    c = shape[1] if len(shape) > 1 else 1
    inputs = [x_of(shape)] + channel_params(c)
    outputs = 3 if training else 1
    check_device("BatchNormalization", inputs, outputs=outputs, training_mode=training,
                 epsilon=1e-3, momentum=0.8, **TOL[np.float32])  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_batch_normalization_relu(dtype):
    inputs = [x_of((2, 5, 7, 9), dtype)] + channel_params(5, dtype)
    check_device("BatchNormalizationRelu", inputs, epsilon=1e-3, **TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("training", [0, 1])
def test_batch_normalization_dtypes(dtype, training):
    inputs = [x_of((4, 3, 50), dtype)] + channel_params(3, dtype)
    check_device("BatchNormalization", inputs, outputs=3 if training else 1,
                 training_mode=training, **TOL[dtype])  # fmt: skip
    mixed = [inputs[0]] + channel_params(3, np.float32)  # float32 parameters
    tol = TOL[np.float16 if dtype == np.float16 else np.float32]
    check_device("BatchNormalization", mixed, outputs=3 if training else 1,
                 training_mode=training, **tol)  # fmt: skip


@pytest.mark.parametrize("shape", [(1, 1), (7,), (2, 3), (4, 3, 5), (2, 5, 7, 9), (3, 2, 257),
                                   (300, 4), (2, 0, 4), (0, 3)])  # fmt: skip
@pytest.mark.parametrize("training", [0, 1])
def test_batch_normalization_gradient(shape, training):
    c = shape[1] if len(shape) > 1 else 1
    scale, _, mean, var = channel_params(c)
    x, dy = x_of(shape), rand(*shape, seed=5)
    stats = [None, None] if training else [mean, var]
    check_device("BatchNormalizationGradient", [x, scale, dy, *stats], outputs=3,
                 training_mode=training, epsilon=1e-3, **TOL[np.float32])  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_batch_normalization_gradient_dtypes(dtype):
    x, dy = x_of((4, 3, 50), dtype), rand(4, 3, 50, seed=5).astype(dtype)
    scale, _, mean, var = channel_params(3, dtype)
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype == np.float16 else TOL[dtype]
    for training, stats in ((1, [None, None]), (0, [mean, var])):
        check_device("BatchNormalizationGradient", [x, scale, dy, *stats], outputs=3,
                     training_mode=training, **tol)  # fmt: skip


# -- LayerNormalization --------------------------------------------------------------------------

LN_CASES = [((1,), -1), ((7,), 0), ((3, 257), -1), ((257, 3), 1), ((2, 3, 4), 1), ((2, 3, 4), 0),
            ((2, 3, 40), -1), ((5, 0), -1), ((0, 5), -1), ((40, 1100), 1)]  # fmt: skip


def _ln_params(shape, axis, full=False):
    normalized = shape[axis % len(shape) :]
    pshape = shape if full else normalized
    return rand(*pshape, seed=1, low=0.5, high=1.5), rand(*pshape, seed=2)


@pytest.mark.parametrize("shape, axis", LN_CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_layer_normalization(shape, axis, with_bias):
    scale, bias = _ln_params(shape, axis)
    inputs = [x_of(shape), scale] + ([bias] if with_bias else [])
    check_device("LayerNormalization", inputs, outputs=3, axis=axis, **TOL[np.float32])


def test_layer_normalization_broadcast_params():
    x = x_of((2, 3, 4))
    check_device("LayerNormalization", [x, *_ln_params((2, 3, 4), 1, full=True)], outputs=3,
                 axis=1)  # fmt: skip
    check_device("LayerNormalization", [x, rand(1, seed=1), rand(3, 1, seed=2)], outputs=3,
                 axis=1)  # fmt: skip
    check_device("LayerNormalization", [x, rand(4, seed=1), rand(1, 1, 4, seed=2)], outputs=3,
                 axis=-1)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("stash_type", [1, 10, 11])
def test_layer_normalization_dtypes(dtype, stash_type):
    x = x_of((3, 257), dtype)
    scale, bias = (p.astype(dtype) for p in _ln_params((3, 257), -1))
    tol = TOL[np.float16] if np.float16 in (dtype,) or stash_type == 10 else TOL[np.float32]
    if dtype == np.float64 and stash_type == 11:
        tol = TOL[np.float64]
    check_device("LayerNormalization", [x, scale, bias], outputs=3, stash_type=stash_type, **tol)


@pytest.mark.parametrize("shape, axis", LN_CASES)
@pytest.mark.parametrize("extras", [0, 1, 2])
def test_layer_normalization_gradient(shape, axis, extras):
    x, dy = x_of(shape), rand(*shape, seed=5)
    scale, _ = _ln_params(shape, axis)
    a = axis % len(shape)
    stat = shape[:a] + (1,) * (len(shape) - a)
    more = [rand(*stat, seed=6), rand(*stat, seed=7)][:extras]
    if extras == 1:
        more = [None, rand(*stat, seed=7)]
    check_device("LayerNormalizationGradient", [x, scale, dy, *more], outputs=2, axis=axis,
                 **TOL[np.float32])  # fmt: skip


def test_layer_normalization_gradient_broadcast_scale():
    x, dy = x_of((2, 3, 4)), rand(2, 3, 4, seed=5)
    for scale in (rand(1, seed=1), rand(3, 1, seed=1), rand(2, 3, 4, seed=1)):
        check_device("LayerNormalizationGradient", [x, scale, dy], outputs=2, axis=1)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("stash_type", [1, 11])
def test_layer_normalization_gradient_dtypes(dtype, stash_type):
    x, dy = x_of((3, 257), dtype), rand(3, 257, seed=5).astype(dtype)
    scale = _ln_params((3, 257), -1)[0].astype(dtype)
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype == np.float16 else TOL[np.float32]
    if dtype == np.float64 and stash_type == 11:
        tol = TOL[np.float64]
    check_device("LayerNormalizationGradient", [x, scale, dy], outputs=2, stash_type=stash_type,
                 **tol)  # fmt: skip


# -- GroupNormalization, InstanceNormalization ----------------------------------------------------


GN_CASES = [((1, 1), 1), ((2, 4), 2), ((2, 6, 5), 3), ((3, 4, 7, 9), 2), ((2, 8, 257), 4),
            ((2, 4, 3), 4)]  # fmt: skip


@pytest.mark.parametrize("shape, groups", GN_CASES)
@pytest.mark.parametrize("stash_type", [1, 11])
def test_group_normalization(shape, groups, stash_type):
    scale, bias = channel_params(shape[1])[:2]
    check_device("GroupNormalization", [x_of(shape), scale, bias], num_groups=groups,
                 stash_type=stash_type, **TOL[np.float32])  # fmt: skip


@pytest.mark.parametrize("shape", [(1, 1), (2, 4), (2, 6, 5), (3, 4, 7, 9), (2, 3, 257)])
def test_instance_normalization(shape):
    scale, bias = channel_params(shape[1])[:2]
    check_device("InstanceNormalization", [x_of(shape), scale, bias], **TOL[np.float32])


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_group_instance_normalization_dtypes(dtype):
    x = x_of((2, 6, 40), dtype)
    scale, bias = (p.astype(dtype) for p in channel_params(6)[:2])
    stash = 11 if dtype == np.float64 else 1
    check_device("GroupNormalization", [x, scale, bias], num_groups=3, stash_type=stash,
                 **TOL[dtype])  # fmt: skip
    check_device(
        "GroupNormalization",
        [x, scale, bias],
        num_groups=2,
        **TOL[np.float16 if dtype == np.float16 else np.float32],
    )
    check_device("InstanceNormalization", [x, scale, bias], **TOL[dtype])


def test_outputs_have_the_cpu_dtypes():
    x = x_of((2, 3, 4))
    (y, mean, inv) = run_op("LayerNormalization", [x, rand(4)], outputs=3, stash_type=10)
    assert mean.dtype == np.float16
    got = check_device("LayerNormalization", [x, rand(4)], outputs=3, stash_type=10,
                       **TOL[np.float16])  # fmt: skip
    assert [g.dtype for g in got] == [y.dtype, mean.dtype, inv.dtype]


@pytest.mark.parametrize("shape, groups", GN_CASES + [((2, 4, 0), 2)])
@pytest.mark.parametrize("stash_type", [1, 11])
def test_group_normalization_gradient(shape, groups, stash_type):
    x, dy, scale = x_of(shape), rand(*shape, seed=5), channel_params(shape[1])[0]
    check_device("GroupNormalizationGradient", [x, scale, dy], outputs=3, num_groups=groups,
                 stash_type=stash_type, **TOL[np.float32])  # fmt: skip


@pytest.mark.parametrize("shape", [(1, 1), (2, 4), (2, 6, 5), (3, 4, 7, 9), (2, 3, 257)])
def test_instance_normalization_gradient(shape):
    x, dy, scale = x_of(shape), rand(*shape, seed=5), channel_params(shape[1])[0]
    check_device("InstanceNormalizationGradient", [x, scale, dy], outputs=3, **TOL[np.float32])


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_group_instance_normalization_gradient_dtypes(dtype):
    x, dy = x_of((2, 6, 40), dtype), rand(2, 6, 40, seed=5).astype(dtype)
    scale = channel_params(6)[0].astype(dtype)
    tol = {"atol": 5e-2, "rtol": 2e-2} if dtype == np.float16 else TOL[dtype]
    stash = 11 if dtype == np.float64 else 1
    check_device("GroupNormalizationGradient", [x, scale, dy], outputs=3, num_groups=3,
                 stash_type=stash, **tol)  # fmt: skip
    check_device("InstanceNormalizationGradient", [x, scale, dy], outputs=3, **tol)
