"""ConvRelu, GemmRelu and FCRelu against their base op followed by a NumPy Relu; FusedConv
against Conv, then a residual add, then Relu or Clip, with the JIT on and off."""

import contextlib

import numpy as np
import onnx
import pytest

from netbrew import jit
from netbrew.converters.onnx.to_onnx import CONVERTERS
from netbrew.operators import GRADIENTS
from netbrew.operators.conv_last import channels_last
from netbrew.testing import check_op, rand, run_op

CASES = [
    (
        "ConvRelu",
        "Conv",
        [rand(2, 3, 6, 6, seed=1), rand(4, 3, 3, 3, seed=2), rand(4, seed=3)],
        {"pads": [1, 1, 1, 1]},
    ),
    (
        "ConvRelu",
        "Conv",
        [rand(1, 4, 5, 5, seed=1), rand(4, 2, 3, 3, seed=2)],
        {"group": 2, "strides": [2, 2]},
    ),
    (
        "GemmRelu",
        "Gemm",
        [rand(3, 5, seed=1), rand(4, 5, seed=2), rand(4, seed=3)],
        {"transB": 1, "alpha": 0.5},
    ),
    ("GemmRelu", "Gemm", [rand(3, 5, seed=1), rand(5, 4, seed=2)], {}),
    ("FCRelu", "FC", [rand(2, 3, 2, 2, seed=1), rand(5, 12, seed=2), rand(5, seed=3)], {}),
]


CASES.append(  # squeezenet's expand conv: im2col, then the bias and Relu in one pass
    (
        "ConvRelu",
        "Conv",
        [rand(1, 16, 13, 13, seed=4), rand(32, 16, 3, 3, seed=5), rand(32, seed=6)],
        {"pads": [1, 1, 1, 1]},
    )
)


@pytest.mark.parametrize("jit_on", [True, False])
@pytest.mark.parametrize("fused, base, inputs, attrs", CASES)
def test_fused_equals_base_then_relu(fused, base, inputs, attrs, jit_on):
    (before,) = run_op(base, inputs, **attrs)
    assert (before < 0).any()  # the Relu has something to do
    with contextlib.nullcontext() if jit_on else jit.disabled():
        check_op(fused, inputs, reference=lambda *a: (np.maximum(before, 0),), **attrs)


@pytest.mark.parametrize("fused", ["ConvRelu", "GemmRelu", "FCRelu"])
def test_fused_ops_have_a_gradient_and_export_split(fused):
    assert callable(GRADIENTS[fused])  # checked by central differences in test_fused_grad.py
    from netbrew.netdef import op_def

    op = op_def(fused, ["x", "w", "b"], ["y"])
    nodes = CONVERTERS[fused](op).nodes
    assert nodes[-1].op_type == "Relu" and nodes[-1].output == ["y"]
    assert nodes[-2].op_type in ("Conv", "Gemm") and nodes[-2].output == nodes[-1].input
    for node in nodes:
        onnx.checker.check_node(node)


def _conv_then(x, w, b, z, activation, bounds, **attrs):
    """FusedConv's reference: Conv, then + z, then Relu or Clip, as NumPy."""
    (y,) = run_op("Conv", [x, w, b], **attrs)
    if z is not None:
        y = y + z
    if activation == "Relu":
        y = np.maximum(y, 0)
    elif activation == "Clip":
        low, high = (-np.inf if v is None else v for v in bounds)
        y = np.minimum(np.maximum(y, low), high)
    return y


FUSED_CONV_CASES = [
    # x shape, w shape, attrs, residual?, activation, (min, max)
    ((2, 6, 7, 7), (8, 6, 1, 1), {}, True, "Relu", (None, None)),  # ResNet's 1x1 + Add + Relu
    ((1, 4, 9, 8), (4, 1, 3, 3), {"group": 4, "pads": [1] * 4}, False, "Clip", (0.0, 6.0)),
    ((1, 4, 9, 8), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}, True, "Clip", (0.0, 0.5)),
    ((1, 5, 6, 6), (3, 5, 3, 3), {"pads": [1, 0, 1, 2]}, True, "", (None, None)),
    ((1, 5, 6, 6), (6, 5, 1, 1), {}, False, "Clip", (None, 0.25)),  # max bound only
    ((1, 5, 6, 6), (6, 5, 1, 1), {}, False, "Clip", (0.5, -0.5)),  # min > max: all max
    ((2, 4, 5, 5), (4, 2, 3, 3), {"group": 2, "dilations": [2, 1]}, True, "Relu", (None, None)),
]


@pytest.mark.parametrize("jit_on", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, attrs, with_z, activation, bounds", FUSED_CONV_CASES)
def test_fused_conv_equals_conv_add_activation(
    x_shape, w_shape, attrs, with_z, activation, bounds, dtype, jit_on
):
    x = rand(*x_shape, dtype=dtype, seed=1) * 3
    w = rand(*w_shape, dtype=dtype, seed=2)
    b = rand(w_shape[0], dtype=dtype, seed=3)
    (conv_out,) = run_op("Conv", [x, w, b], **attrs)
    z = rand(*conv_out.shape, dtype=dtype, seed=4) if with_z else None
    arrays = [None if v is None else np.array(v, dtype) for v in bounds]
    inputs = [x, w, b, z, *arrays] if activation == "Clip" else [x, w, b, z]
    want = _conv_then(x, w, b, z, activation, bounds, **attrs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    with contextlib.nullcontext() if jit_on else jit.disabled():
        got = check_op(
            "FusedConv",
            inputs,
            reference=lambda *a: (want,),
            activation=activation,
            atol=tol,
            rtol=tol,
            **attrs,
        )[0]
    assert got.flags.c_contiguous or channels_last(got)  # the two layouts convs hand on


def test_fused_conv_residual_that_broadcasts_takes_the_add_kernel():
    x, w = rand(1, 3, 4, 4, seed=1), rand(2, 3, 1, 1, seed=2)
    z = rand(2, 2, 4, 4, seed=3)  # broadcasts the batch: Add's result, not the conv's shape
    want = _conv_then(x, w, None, z, "Relu", (None, None))
    check_op("FusedConv", [x, w, None, z], reference=lambda *a: (want,), activation="Relu")


def test_fused_conv_errors_name_the_argument():
    x, w = rand(1, 3, 4, 4, seed=1), rand(2, 3, 1, 1, seed=2)
    with pytest.raises(Exception, match="activation='Tanh' is not one of"):
        run_op("FusedConv", [x, w], activation="Tanh")
    with pytest.raises(Exception, match="min and max are Clip's bounds"):
        run_op("FusedConv", [x, w, None, None, np.float32(0)], activation="Relu")
    with pytest.raises(Exception, match="dtype"):  # as Add: the residual's dtype must match
        run_op("FusedConv", [x, w, None, rand(1, 2, 4, 4, dtype=np.float64)])


@pytest.mark.parametrize(
    "inputs, activation, kinds",
    [
        (["x", "w", "b", "z"], "Relu", ["Conv", "Add", "Relu"]),
        (["x", "w", "", "", "lo", "hi"], "Clip", ["Conv", "Clip"]),
        (["x", "w", "b", "z", "", "hi"], "Clip", ["Conv", "Add", "Clip"]),
        (["x", "w", "b", "z"], "", ["Conv", "Add"]),
    ],
)
def test_fused_conv_exports_the_unfused_nodes(inputs, activation, kinds):
    from netbrew.netdef import op_def

    op = op_def("FusedConv", inputs, ["y"], activation=activation, pads=[1, 1, 1, 1])
    nodes = CONVERTERS["FusedConv"](op).nodes
    assert [n.op_type for n in nodes] == kinds
    assert nodes[-1].output == ["y"] and list(nodes[0].input) == [i for i in inputs[:3] if i]
    for a, b in zip(nodes, nodes[1:]):
        assert b.input[0] == a.output[0]
    for node in nodes:
        onnx.checker.check_node(node)
    assert callable(GRADIENTS["FusedConv"])


def _bn_inputs(dtype, nan=False):
    x = rand(2, 5, 4, 3, seed=11).astype(dtype)
    if nan:
        x[1, 2, 0, 1] = np.nan
    params = [rand(5, seed=s).astype(dtype) for s in (12, 13, 14)]
    var = (np.abs(rand(5, seed=15)) + 0.5).astype(dtype)
    return [x, *params, var]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("jit_on", [True, False])
def test_batch_norm_relu_equals_bn_then_relu(dtype, jit_on):
    """The inference BN with its Relu in one numba pass (JIT on) or BN's kernel then Relu
    (JIT off); a NaN stays NaN, as through Relu."""
    inputs = _bn_inputs(dtype, nan=True)
    (before,) = run_op("BatchNormalization", inputs, epsilon=1e-3)
    assert (before < 0).any() and np.isnan(before).sum() == 1
    with contextlib.nullcontext() if jit_on else jit.disabled():
        (got,) = run_op("BatchNormalizationRelu", inputs, epsilon=1e-3)
    assert got.dtype == dtype and got.shape == before.shape
    np.testing.assert_allclose(got, np.maximum(before, 0), rtol=1e-6, atol=1e-6)
    assert np.isnan(got[1, 2, 0, 1])


def test_batch_norm_relu_has_a_gradient_and_exports_split():
    assert callable(GRADIENTS["BatchNormalizationRelu"])  # central differences: test_fused_grad
    from netbrew.netdef import op_def

    op = op_def("BatchNormalizationRelu", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3)
    nodes = CONVERTERS["BatchNormalizationRelu"](op).nodes
    assert [n.op_type for n in nodes] == ["BatchNormalization", "Relu"]
    assert list(nodes[0].input) == ["x", "s", "b", "m", "v"] and nodes[1].output == ["y"]
    assert nodes[0].output == nodes[1].input
    for node in nodes:
        onnx.checker.check_node(node)
