"""CUDA Conv, ConvTranspose, their gradients and ConvRelu against the NumPy kernels: 1-D, 2-D
and 3-D, groups, depthwise, dilations, strides, pads and auto_pad, through cuDNN, through
im2col and cuBLAS (NETBREW_CUDNN=0) and through netbrew's own tiled GEMM (NETBREW_CUBLAS=0)."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.operators.cuda import conv as cuda_conv
from netbrew.testing import check_device, rand, run_op

TOL = {"atol": 1e-4, "rtol": 1e-4}
F16 = {"atol": 2e-2, "rtol": 2e-2}


@pytest.fixture(params=["cudnn", "cublas", "own"], autouse=True)
def backend(request, monkeypatch):
    if request.param != "cudnn":
        monkeypatch.setenv("NETBREW_CUDNN", "0")
    if request.param == "own":
        monkeypatch.setenv("NETBREW_CUBLAS", "0")
    return request.param


def test_cudnn_plans_the_convs_it_can(backend):
    """With cuDNN loaded, symmetric-pad convs of 1-3 spatial axes over several images go to
    it; asymmetric pads, single images and 4 spatial axes stay on netbrew's own kernels."""
    from netbrew.cuda import cudnn
    from netbrew.operators.window import make_window

    if backend != "cudnn" or not cudnn.enabled():
        pytest.skip("cuDNN is off or not installed")
    win = make_window((9, 9), (3, 3), [2, 2], None, [1, 1, 1, 1])
    plan = cudnn.plan(0, (2, 4, 9, 9), (6, 2, 3, 3), win, 2)
    assert plan is not None and plan.algo("fwd") is not None
    lopsided = make_window((9, 9), (3, 3), None, None, [0, 1, 1, 1])
    assert cudnn.plan(0, (2, 4, 9, 9), (6, 2, 3, 3), lopsided, 2) is None
    assert cudnn.plan(0, (1, 4, 9, 9), (6, 2, 3, 3), win, 2) is None  # one image
    four = make_window((3, 3, 3, 3), (1, 1, 1, 1))
    assert cudnn.plan(0, (1, 1, 3, 3, 3, 3), (1, 1, 1, 1, 1, 1), four, 1) is None


# (X shape, W shape, attributes)
CONV_CASES = [
    ((2, 3, 9), (4, 3, 3), {}),  # 1-D
    ((2, 3, 11), (4, 3, 3), {"strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 1, 1), (1, 1, 1), {}),
    ((2, 3, 7, 8), (5, 3, 3, 2), {}),  # 2-D, odd sizes
    ((2, 3, 7, 8), (5, 3, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    ((1, 2, 9, 9), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [2, 1, 2, 3]}),
    ((2, 3, 7, 6), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 6, 7), (4, 3, 2, 4), {"auto_pad": "SAME_LOWER"}),
    ((2, 3, 6, 7), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((2, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),  # groups
    ((3, 6, 5, 5), (6, 2, 1, 1), {"group": 3}),  # grouped 1x1, more images than groups
    ((1, 8, 5, 5), (8, 2, 3, 3), {"group": 4, "strides": [2, 1]}),  # more groups than images
    ((2, 3, 7, 7), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),  # depthwise
    ((2, 3, 8, 7), (6, 1, 3, 3), {"group": 3, "strides": [2, 2], "dilations": [1, 2]}),
    ((2, 4, 9), (4, 1, 5), {"group": 4, "pads": [2, 2]}),  # 1-D depthwise
    ((2, 5, 6, 6), (7, 5, 1, 1), {}),  # 1x1
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),  # 3-D
    ((2, 2, 4, 5, 6), (4, 1, 3, 2, 3), {"group": 2, "strides": [2, 1, 2], "dilations": [1, 2, 1]}),
]


def _inputs(sx, sw, attrs, bias=True, dtype=np.float32):
    group = attrs.get("group", 1)
    x, w = rand(*sx, dtype=dtype), rand(*sw, seed=1, dtype=dtype)
    b = rand(sw[0], seed=2, dtype=dtype) if bias else None
    return x, w, b, group


@pytest.mark.parametrize("sx,sw,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv(sx, sw, attrs, bias):
    x, w, b, _ = _inputs(sx, sw, attrs, bias)
    check_device("Conv", [x, w, b], **attrs, **TOL)


def test_conv_in_chunks(monkeypatch):
    """Columns made a few images at a time give the same result."""
    monkeypatch.setattr(cuda_conv, "COLS_BYTES", 4 * 3 * 9 * 36)
    x, w = rand(5, 3, 6, 6), rand(4, 3, 3, 3, seed=1)
    check_device("Conv", [x, w, rand(4, seed=2)], pads=[1, 1, 1, 1], **TOL)
    check_device("ConvGradient", [x, w, rand(5, 4, 6, 6, seed=3)], outputs=3,
                 pads=[1, 1, 1, 1], **TOL)  # fmt: skip


def test_conv_float16():
    x, w, b, _ = _inputs((2, 3, 6, 6), (4, 3, 3, 3), {}, dtype=np.float16)
    check_device("Conv", [x, w, b], pads=[1, 1, 1, 1], **F16)
    x, w, b, _ = _inputs((1, 4, 5, 5), (4, 1, 3, 3), {}, dtype=np.float16)
    check_device("Conv", [x, w, b], group=4, **F16)


def test_larger_images():
    """Many blocks per launch, and GEMMs past one tile in every dim."""
    x, w, b, _ = _inputs((3, 16, 33, 31), (32, 16, 3, 3), {})
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 1]}
    check_device("Conv", [x, w, b], **attrs, **TOL)
    dy = _dy("Conv", x, w, attrs)
    check_device("ConvGradient", [x, w, dy], outputs=3, atol=1e-3, rtol=1e-4, **attrs)
    x, w, b, _ = _inputs((2, 24, 30, 30), (24, 1, 5, 5), {})
    check_device("Conv", [x, w, b], group=24, pads=[2, 2, 2, 2], **TOL)


def test_conv_transpose_float16():
    x, w = rand(2, 4, 5, 5, dtype=np.float16), rand(4, 3, 3, 3, seed=1, dtype=np.float16)
    b = rand(3, seed=2, dtype=np.float16)
    check_device("ConvTranspose", [x, w, b], strides=[2, 2], pads=[1, 1, 0, 0], **F16)
    dy = _dy("ConvTranspose", x, w, {"strides": [2, 2]})
    check_device("ConvTransposeGradient", [x, w, dy.astype(np.float16)], outputs=3,
                 strides=[2, 2], **F16)  # fmt: skip


def test_conv_relu():
    x, w, b, _ = _inputs((2, 3, 6, 5), (4, 3, 3, 3), {})
    check_device("ConvRelu", [x, w, b], pads=[1, 1, 1, 1], **TOL)


def run_gpu(op_type, inputs, **attrs):
    """Runs the op on cuda:0 only (for its errors)."""
    run_op(op_type, inputs, device="cuda:0", **attrs)


def test_conv_errors():
    with pytest.raises(OperatorError, match="Conv failed on cuda:0: input X has C=3 channels"):
        run_gpu("Conv", [rand(1, 3, 5, 5), rand(2, 2, 3, 3)])
    x, w = rand(1, 1, 3, 3, dtype=np.float64), rand(1, 1, 2, 2, dtype=np.float64)
    with pytest.raises(OperatorError, match="Conv: no CUDA kernel for dtype float64"):
        run_gpu("Conv", [x, w])
    with pytest.raises(OperatorError, match="ConvTranspose failed on cuda:0: pads="):
        run_gpu("ConvTranspose", [rand(1, 1, 2, 2), rand(1, 1, 2, 2)], pads=[2, 2, 2, 2])


def _dy(op, x, w, attrs, b=None):
    y = run_op(op, [x, w, b], **attrs)[0]
    return rand(*y.shape, seed=3)


@pytest.mark.parametrize("sx,sw,attrs", CONV_CASES)
def test_conv_gradient(sx, sw, attrs):
    x, w, _, _ = _inputs(sx, sw, attrs, bias=False)
    check_device("ConvGradient", [x, w, _dy("Conv", x, w, attrs)], outputs=3, **attrs, **TOL)


@pytest.mark.parametrize("names", [["dX", "", ""], ["", "dW", ""], ["", "", "dB"]])
def test_conv_gradient_mask(names):
    x, w = rand(2, 4, 6, 5), rand(6, 2, 3, 3, seed=1)
    attrs = {"group": 2, "pads": [1, 0, 1, 1]}
    check_masked("ConvGradient", [x, w, _dy("Conv", x, w, attrs)], names, **attrs)


def test_conv_gradient_float16():
    x, w, _, _ = _inputs((2, 3, 5, 5), (4, 3, 3, 3), {}, bias=False, dtype=np.float16)
    dy = rand(2, 4, 3, 3, seed=3, dtype=np.float16)
    check_device("ConvGradient", [x, w, dy], outputs=3, **F16)


# (X shape, W shape (C, M/group, k...), attributes)
TRANSPOSE_CASES = [
    ((2, 3, 5), (3, 2, 3), {}),  # 1-D
    ((2, 3, 5), (3, 2, 3), {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {}),  # 2-D
    ((2, 2, 4, 3), (2, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 0, 1]}),
    ((1, 2, 4, 4), (2, 2, 3, 3), {"dilations": [2, 1], "strides": [2, 2]}),
    ((1, 2, 3, 3), (2, 1, 3, 3), {"strides": [2, 2], "output_shape": [8, 8]}),  # a crop < 0
    ((1, 2, 3, 3), (2, 1, 3, 3), {"strides": [2, 2], "output_shape": [6, 6]}),
    ((2, 2, 3, 4), (2, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 2, 3, 4), (2, 2, 2, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
    ((2, 4, 3, 3), (4, 3, 3, 3), {"group": 2, "strides": [2, 1]}),  # groups
    ((2, 3, 4, 4), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), {"strides": [2, 1, 2], "pads": [0, 1, 0, 1, 0, 0]}),  # 3-D
]


@pytest.mark.parametrize("sx,sw,attrs", TRANSPOSE_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(sx, sw, attrs, bias):
    x, w = rand(*sx), rand(*sw, seed=1)
    b = rand(sw[1] * attrs.get("group", 1), seed=2) if bias else None
    check_device("ConvTranspose", [x, w, b], **attrs, **TOL)


@pytest.mark.parametrize("sx,sw,attrs", TRANSPOSE_CASES)
def test_conv_transpose_gradient(sx, sw, attrs):
    x, w = rand(*sx), rand(*sw, seed=1)
    dy = _dy("ConvTranspose", x, w, attrs)
    check_device("ConvTransposeGradient", [x, w, dy], outputs=3, **attrs, **TOL)


def test_conv_transpose_gradient_mask():
    x, w = rand(2, 2, 4, 3), rand(2, 3, 3, 2, seed=1)
    attrs = {"strides": [2, 1]}
    dy = _dy("ConvTranspose", x, w, attrs)
    check_masked("ConvTransposeGradient", [x, w, dy], ["", "dW", "dB"], **attrs)
    check_masked("ConvTransposeGradient", [x, w, dy], ["dX", "", ""], **attrs)


def check_masked(op_type, inputs, names, **attrs):
    """check_device with some outputs unnamed ("" in `names`: not computed)."""
    expected = run_op(op_type, inputs, outputs=names, **attrs)
    ws = Workspace()
    for i, value in enumerate(inputs):
        ws.feed_blob(f"in{i}", value, device="cuda:0")
    in_names = [f"in{i}" for i in range(len(inputs))]
    ws.run_operator_once(op_def(op_type, in_names, names, device="cuda:0", **attrs))
    got = [ws.fetch_blob(n) for n in names if n]
    for g, e, name in zip(got, expected, [n for n in names if n]):
        assert g.shape == e.shape and g.dtype == e.dtype, (name, g.shape, e.shape)
        np.testing.assert_allclose(g, e, err_msg=f"{op_type} {name}", **TOL)
