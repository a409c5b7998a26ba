"""MatMulBias and SkipLayerNormalization: against NumPy references written here, the numba
paths against the NumPy ones (jit.disabled()), gradients by central differences, errors."""

import math

import numpy as np
import pytest

from netbrew import jit
from netbrew.errors import OperatorError
from netbrew.testing import check_gradient, check_op, rand, run_op

ERF = np.vectorize(math.erf)


def matmul_bias_ref(a, b, c, activation=""):
    y = np.matmul(a.astype(np.float64), b) + c
    if activation == "Gelu":
        y = y / 2 * (1 + ERF(y / math.sqrt(2)))
    return (y.astype(a.dtype),)


def skip_layer_norm_ref(x, skip, scale, b=None, axis=-1, epsilon=1e-5):
    s = x.astype(np.float64) + skip
    axes = tuple(range(axis % s.ndim, s.ndim))
    mean = s.mean(axis=axes, keepdims=True)
    var = ((s - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (s - mean) / np.sqrt(var + epsilon) * scale
    return ((y if b is None else y + b).astype(x.dtype),)


MATMUL_CASES = [  # (A shape, B shape, C shape)
    ((1, 128, 96), (96, 48), (48,)),  # BERT-like: 3-D activations, 2-D weight, row bias
    ((3, 5, 7), (7, 9), (1, 9)),  # odd sizes, batch > 1, bias with a leading 1
    ((2, 3, 4, 5), (5, 6), (1, 1, 6)),
    ((5, 7), (7, 3), (3,)),
    ((2, 5, 7), (2, 7, 3), (3,)),  # batched B
    ((4, 6), (6, 5), (4, 1)),  # a column bias: broadcast as Add does, NumPy path
    ((4, 6), (6, 5), ()),  # a scalar bias
    ((3, 6), (6, 5), (2, 3, 5)),  # a bias that adds a leading dim
]


@pytest.mark.parametrize("a_shape, b_shape, c_shape", MATMUL_CASES)
@pytest.mark.parametrize("activation", ["", "Gelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_bias(a_shape, b_shape, c_shape, activation, dtype):
    a, b = rand(*a_shape, dtype=dtype, low=-2, high=2), rand(*b_shape, dtype=dtype, seed=1)
    c = rand(*c_shape, dtype=dtype, seed=2)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    got = check_op(
        "MatMulBias",
        [a, b, c],
        lambda *v: matmul_bias_ref(*v, activation),
        atol=tol,
        rtol=tol,
        activation=activation,
    )
    with jit.disabled():
        (numpy_path,) = run_op("MatMulBias", [a, b, c], activation=activation)
    np.testing.assert_allclose(got[0], numpy_path, rtol=tol, atol=tol)


def test_matmul_bias_keeps_nan_and_saturates():
    a = np.array([[np.nan, 0.0], [30.0, 0.0], [-30.0, 0.0]], np.float32)
    b = np.eye(2, dtype=np.float32)
    (y,) = run_op("MatMulBias", [a, b, np.zeros(2, np.float32)], activation="Gelu")
    assert np.isnan(y[0, 0]) and y[1, 0] == 30.0 and y[2, 0] == 0.0


def test_matmul_bias_non_contiguous_and_mixed_dtype_operands():
    a = rand(4, 7, 6).transpose(1, 0, 2)  # a strided view
    b, c = rand(6, 5, seed=1), rand(5, seed=2)
    check_op("MatMulBias", [a, b, c], lambda *v: matmul_bias_ref(*v, "Gelu"), activation="Gelu")
    with pytest.raises(OperatorError, match="dtype float64, expected float32"):  # as Add
        run_op("MatMulBias", [a, b, c.astype(np.float64)])


def test_matmul_bias_errors_name_the_op_and_argument():
    with pytest.raises(OperatorError, match="activation='Relu'"):
        run_op("MatMulBias", [rand(2, 3), rand(3, 4), rand(4)], activation="Relu")
    with pytest.raises(OperatorError, match="inner dims differ"):
        run_op("MatMulBias", [rand(2, 3), rand(4, 4), rand(4)])


@pytest.mark.parametrize("activation", ["", "Gelu"])
@pytest.mark.parametrize("c_shape", [(5,), (1, 5), (3, 5)])
def test_matmul_bias_gradient(activation, c_shape):
    inputs = [rand(2, 3, 4, low=-2, high=2), rand(4, 5, seed=1), rand(*c_shape, seed=2)]
    check_gradient("MatMulBias", inputs, eps=1e-6, activation=activation)


SKIP_CASES = [  # (X shape, Skip shape, Scale shape, B shape or None, axis)
    ((1, 128, 96), (1, 128, 96), (96,), (96,), -1),  # BERT-like
    ((3, 5, 7), (3, 5, 7), (7,), None, -1),  # odd sizes, no bias
    ((2, 3, 4, 5), (2, 3, 4, 5), (4, 5), (4, 5), 2),  # two normalized dims
    ((2, 3, 6), (3, 6), (6,), (6,), -1),  # Skip broadcast: NumPy path
    ((2, 3, 6), (2, 3, 6), (1, 6), (6,), -1),  # Scale with a leading 1
    ((4, 6), (4, 6), (4, 6), (6,), 0),  # axis 0: every element in one row
]


@pytest.mark.parametrize("x_shape, s_shape, g_shape, b_shape, axis", SKIP_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_skip_layer_normalization(x_shape, s_shape, g_shape, b_shape, axis, dtype):
    x, skip = rand(*x_shape, dtype=dtype, low=-3, high=5), rand(*s_shape, dtype=dtype, seed=1)
    inputs = [x, skip, rand(*g_shape, dtype=dtype, seed=2)]
    if b_shape is not None:
        inputs.append(rand(*b_shape, dtype=dtype, seed=3))
    tol = 1e-5 if dtype == np.float32 else 1e-9
    attrs = {"axis": axis, "epsilon": 1e-3, "stash_type": 1 if dtype == np.float32 else 11}
    got = check_op(
        "SkipLayerNormalization",
        inputs,
        lambda *v: skip_layer_norm_ref(*v, axis=axis, epsilon=1e-3),
        atol=tol,
        rtol=tol,
        **attrs,
    )
    with jit.disabled():
        (numpy_path,) = run_op("SkipLayerNormalization", inputs, **attrs)
    np.testing.assert_allclose(got[0], numpy_path, rtol=tol, atol=tol)


def test_skip_layer_normalization_strided_input_and_errors():
    x = rand(6, 4, 5).transpose(1, 0, 2)
    inputs = [x, rand(4, 6, 5, seed=1), rand(5, seed=2), rand(5, seed=3)]
    check_op("SkipLayerNormalization", inputs, skip_layer_norm_ref)
    with pytest.raises(OperatorError, match="Scale has shape"):
        run_op("SkipLayerNormalization", [rand(2, 5), rand(2, 5), rand(4)])
    with pytest.raises(OperatorError, match="stash_type=3"):
        run_op("SkipLayerNormalization", [rand(2, 5), rand(2, 5), rand(5)], stash_type=3)


@pytest.mark.parametrize(
    "shapes, axis",
    [
        (((2, 3, 4), (2, 3, 4), (4,), (4,)), -1),
        (((2, 3, 4), (3, 4), (3, 4), None), 1),  # Skip broadcast: its gradient is reduced
    ],
)
def test_skip_layer_normalization_gradient(shapes, axis):
    inputs = [rand(*s, seed=n) if s else None for n, s in enumerate(shapes)]
    inputs = [v for v in inputs if v is not None]
    check_gradient("SkipLayerNormalization", inputs, eps=1e-6, axis=axis, stash_type=11)


def test_the_profiler_counts_matmul_bias_flops_as_matmul():
    from netbrew.executor import Workspace
    from netbrew.netdef import op_def
    from netbrew.proto.netbrew_pb2 import NetDef

    net = NetDef(name="mb", external_input=["a", "b", "c"], external_output=["y"])
    net.op.append(op_def("MatMulBias", ["a", "b", "c"], ["y"], activation="Gelu"))
    ws = Workspace()
    for name, value in zip("abc", [rand(2, 3, 4), rand(4, 5, seed=1), rand(5, seed=2)]):
        ws.feed_blob(name, value)
    ws.create_net(net)
    (row,) = ws.run_net("mb", profile=True).op_rows()
    assert row.op_type == "MatMulBias" and row.gflops_per_s is not None
