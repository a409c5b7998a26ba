"""The channels-last im2col path (conv_hwc) equals Conv, and ConvWinograd runs it for U laid
out (kh, kw, C, M)."""

import contextlib

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import conv_hwc as ch
from netbrew.operators.conv import conv_cpu
from netbrew.operators.schema import get_kernel
from netbrew.operators.window import make_window
from tests.operators.test_conv_winograd import _channels_last, _is_channels_last


@pytest.mark.parametrize(
    "x_shape, m, kernel, strides, pads",
    [
        ((1, 64, 14, 14), 64, 3, 1, (1, 1, 1, 1)),  # ResNet-50's 14x14 convs, narrower
        ((1, 16, 28, 28), 24, 3, 2, (1, 1, 1, 1)),  # stride 2
        ((2, 8, 15, 13), 5, 3, 2, (0, 1, 2, 0)),  # batch 2, odd sizes, asymmetric pads
        ((1, 8, 11, 12), 6, 5, 2, (2, 2, 2, 2)),  # a 5x5 kernel
        ((1, 4, 9, 9), 3, 3, 1, (0, 0, 0, 0)),  # no padding
        ((1, 4, 8, 8), 3, 3, 2, (0, 0, 0, 0)),  # the last row and column no window reads
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
@pytest.mark.parametrize("jit_on", [True, False], ids=["numba-epilogue", "numpy-epilogue"])
def test_hwc_matches_conv(x_shape, m, kernel, strides, pads, dtype, layout, jit_on):
    """Bias and Relu after the GEMM: one numba pass with the JIT on, NumPy's otherwise."""
    with contextlib.nullcontext() if jit_on else jit.disabled():
        _check_hwc(x_shape, m, kernel, strides, pads, dtype, layout)


def _check_hwc(x_shape, m, kernel, strides, pads, dtype, layout):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = (rng.standard_normal((m, x_shape[1], kernel, kernel)) / 5).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    attrs = {"strides": [strides] * 2, "pads": list(pads)}
    (want,) = conv_cpu(x, w, b, **attrs)
    win = make_window(x.shape[2:], w.shape[2:], attrs["strides"], None, attrs["pads"], "NOTSET")
    src = _channels_last(x) if layout == "channels_last" else x
    got = ch.hwc_correlate(src, ch.hwc_weights(w), win, b)
    assert got.shape == want.shape and got.dtype == dtype and _is_channels_last(got)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    relu = ch.hwc_correlate(src, ch.hwc_weights(w), win, b, relu=True)
    np.testing.assert_allclose(relu, np.maximum(want, 0), rtol=tol, atol=tol)


def test_weight_layout_and_stale_check():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((40, 24, 3, 3)).astype(np.float32)
    u = ch.hwc_weights(w)
    assert u.shape == (3, 3, 24, 40) and u.flags.c_contiguous
    assert u[2, 1, 5, 7] == w[7, 5, 2, 1]
    assert ch.hwc_matches(w, u)
    stale = w.copy()
    stale[39, 23, 1, 2] += 1  # the last sampled channel pair
    assert not ch.hwc_matches(stale, u)
    assert not ch.hwc_matches(w, u[:, :, :, :-1])  # shape
    with pytest.raises(ValueError, match=r"hwc_weights: w has shape \[3, 3\]"):
        ch.hwc_weights(np.ones((3, 3), np.float32))


def test_use_hwc_rule():
    assert ch.use_hwc(256, 256, (14, 14), (14, 14))  # ResNet-50's 14x14 convs
    assert ch.use_hwc(256, 256, (28, 28), (14, 14), (2, 2))  # its 28x28 stride-2 conv
    assert not ch.use_hwc(128, 128, (56, 56), (28, 28), (2, 2))  # a big NCHW input to copy
    assert not ch.use_hwc(512, 512, (7, 7), (7, 7))  # 7x7: the GEMM runs slower
    assert ch.use_hwc(16, 64, (55, 55), (55, 55))  # squeezenet's expand convs
    assert ch.use_hwc(64, 256, (13, 13), (13, 13))
    assert not ch.use_hwc(8, 256, (14, 14), (14, 14))  # runs of 3 * 8 values: too short
    assert not ch.use_hwc(64, 64, (112, 112), (112, 112))  # stride 1, but 112x112


@pytest.mark.parametrize("op_type", ["ConvWinograd", "ConvWinogradRelu"])
def test_op_runs_hwc_and_falls_back_on_a_stale_layout(op_type, monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 10, 10)).astype(np.float32)
    w = (rng.standard_normal((8, 16, 3, 3)) / 6).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    attrs = {"strides": [2, 2], "pads": [1, 0, 1, 0], "kernel_shape": [3, 3]}
    (want,) = conv_cpu(x, w, b, **attrs)
    if op_type.endswith("Relu"):
        want = np.maximum(want, 0)
    calls = []
    real = ch.hwc_correlate
    import netbrew.operators.conv_winograd as cw

    monkeypatch.setattr(cw, "hwc_correlate", lambda *a: calls.append(1) or real(*a))
    run = get_kernel(op_type)
    (got,) = run(x, w, ch.hwc_weights(w), b, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert calls == [1] and _is_channels_last(got)
    w2 = w * -2  # fed after the pass: U is stale, so the op runs as Conv on the new W
    (want2,) = conv_cpu(x, w2, b, **attrs)
    if op_type.endswith("Relu"):
        want2 = np.maximum(want2, 0)
    (got2,) = run(x, w2, ch.hwc_weights(w), b, **attrs)
    np.testing.assert_allclose(got2, want2, rtol=1e-5, atol=1e-5)
    assert calls == [1]
    grouped = run(x, w[:, :8], ch.hwc_weights(w[:, :8]), b, group=2, strides=[1, 1])
    np.testing.assert_allclose(
        grouped[0],
        get_kernel(op_type.replace("Winograd", ""))(x, w[:, :8], b, group=2)[0],
        rtol=1e-5,
        atol=1e-5,
    )  # grouped: runs as Conv
    assert calls == [1]
