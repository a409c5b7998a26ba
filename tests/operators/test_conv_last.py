"""Channels-last convs (conv_last): depthwise and 1x1 convs hand each other (N, C, H, W)
views of channels-last memory, with the same numbers as the NumPy path (`jit.disabled()`)
and the C-ordered path, whatever layout each input comes in."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import conv_last
from netbrew.operators.conv_last import channels_last, to_last
from netbrew.testing import run_op

needs_jit = pytest.mark.skipif(not jit.enabled(), reason="numba missing or NETBREW_JIT=0")


def as_last(x: np.ndarray) -> np.ndarray:
    """x's values as an (N, C, H, W) view of channels-last memory."""
    return to_last(x).transpose(0, 3, 1, 2)


def test_channels_last_tells_the_layouts_apart():
    x = np.zeros((2, 3, 4, 5), np.float32)
    assert not channels_last(x)
    assert channels_last(as_last(x))
    assert not channels_last(x.transpose(0, 1, 3, 2))  # some other strides
    assert not channels_last(np.zeros((2, 3, 1, 1), np.float32))  # both layouts: NCHW
    assert to_last(as_last(x)).base is not None  # no copy of channels-last memory


@needs_jit
@pytest.mark.parametrize("op", ["Conv", "FusedConv"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("min_elements", [0, 10**12], ids=["parallel", "serial"])
def test_pointwise_conv_of_channels_last_input(op, dtype, min_elements, monkeypatch):
    """A 1x1 conv of a channels-last X: bias, residual (either layout) and Clip in the
    GEMM's epilogue; the output stays channels-last."""
    monkeypatch.setattr(conv_last, "PARALLEL_MIN_ELEMENTS", min_elements)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 24, 5, 7)).astype(dtype)
    w = rng.standard_normal((40, 24, 1, 1)).astype(dtype)
    b = rng.standard_normal(40).astype(dtype)
    if op == "Conv":
        inputs, attrs = [x, w, b], {}
    else:
        z = rng.standard_normal((2, 40, 5, 7)).astype(dtype)
        lo, hi = np.array(-0.5, dtype), np.array(1.5, dtype)
        inputs, attrs = [x, w, b, as_last(z), lo, hi], {"activation": "Clip"}
    with jit.disabled():
        (want,) = run_op(op, inputs, **attrs)
    inputs[0] = as_last(x)
    (got,) = run_op(op, inputs, **attrs)
    assert channels_last(got) and got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if op == "FusedConv":  # the residual in C order gives the same
        inputs[3] = np.ascontiguousarray(inputs[3])
        np.testing.assert_allclose(run_op(op, inputs, **attrs)[0], want, rtol=tol, atol=tol)


@needs_jit
@pytest.mark.parametrize("op", ["Conv", "FusedConv"])
@pytest.mark.parametrize("group", [2, 3])
def test_grouped_pointwise_conv_of_channels_last_input(op, group, spy):
    """A grouped 1x1 conv (ShuffleNet's) of a channels-last X: one GEMM per group on the
    channel blocks in place, output channels-last, residual in either layout."""
    calls = spy(conv_last, "pointwise_rows")
    rng = np.random.default_rng(group)
    x = rng.standard_normal((2, 16 * group, 4, 6)).astype(np.float32)
    w = rng.standard_normal((18 * group, 16, 1, 1)).astype(np.float32)
    b = rng.standard_normal(18 * group).astype(np.float32)
    inputs, attrs = [x, w, b], {"group": group}
    if op == "FusedConv":
        z = rng.standard_normal((2, 18 * group, 4, 6)).astype(np.float32)
        inputs, attrs = [x, w, b, z], {"group": group, "activation": "Relu"}
    with jit.disabled():
        (want,) = run_op(op, inputs, **attrs)
    for residual_layout in (np.ascontiguousarray, as_last)[: len(inputs) - 2]:
        given = [as_last(x), w, b, *map(residual_layout, inputs[3:])]
        (got,) = run_op(op, given, **attrs)
        assert channels_last(got)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert len(calls) == len(inputs) - 2
    # narrow groups stay on the C-ordered path
    narrow = [as_last(x[:, : 4 * group]), w[:, :4], b, *inputs[3:]]
    with jit.disabled():
        (want,) = run_op(op, [np.ascontiguousarray(narrow[0]), *narrow[1:]], **attrs)
    (got,) = run_op(op, narrow, **attrs)
    assert len(calls) == len(inputs) - 2
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@needs_jit
@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("size", [9, 40], ids=["small", "wide"])
def test_inverted_residual_chain_stays_channels_last(strides, size):
    """1x1 expand + Relu6, depthwise 3x3 + Relu6, 1x1 project (+ the block input): the
    MobileNetV2 block, run op by op. A wide image reaches the depthwise conv in C order
    and is computed on channel planes; a small one, or any channels-last input, goes
    channels-last, and the project conv stays there."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, size, size)).astype(np.float32)
    w1 = rng.standard_normal((32, 8, 1, 1)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((32, 1, 3, 3)).astype(np.float32) * 0.3
    w3 = rng.standard_normal((8, 32, 1, 1)).astype(np.float32) * 0.3
    b1, b2, b3 = (rng.standard_normal(n).astype(np.float32) for n in (32, 32, 8))
    lo, hi = np.array(0, np.float32), np.array(6, np.float32)
    conv_attrs = dict(pads=[1, 1, 1, 1], strides=list(strides), group=32)

    def block(x_in):
        (h,) = run_op("FusedConv", [x_in, w1, b1, None, lo, hi], activation="Clip")
        (d,) = run_op("FusedConv", [h, w2, b2, None, lo, hi], activation="Clip", **conv_attrs)
        z = x_in if strides == (1, 1) else None
        (y,) = run_op("FusedConv", [d, w3, b3, z], activation="")
        return h, d, y

    with jit.disabled():
        want = block(x)
    for x_in in (x, as_last(x)):
        got = block(x_in)
        for g, v in zip(got, want):
            np.testing.assert_allclose(g, v, rtol=1e-4, atol=1e-5)
        wide_nchw = size == 40 and strides == (1, 1) and not channels_last(x_in)
        assert channels_last(got[1]) is not wide_nchw
        assert channels_last(got[2]) is channels_last(got[1])


@needs_jit
def test_channels_last_output_feeds_any_op():
    """Other ops read the view as the NCHW array it is: pooling, Add, Concat, Reshape."""
    rng = np.random.default_rng(2)
    x = as_last(rng.standard_normal((1, 16, 6, 6)).astype(np.float32))
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    (y,) = run_op("Conv", [x, w], pads=[1, 1, 1, 1], group=16)
    assert channels_last(y)
    with jit.disabled():
        (want,) = run_op("Conv", [np.ascontiguousarray(x), w], pads=[1, 1, 1, 1], group=16)
    for op, extra, attrs in [
        ("GlobalAveragePool", [], {}),
        ("MaxPool", [], {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("Add", [want], {}),
        ("Concat", [want], {"axis": 1}),
        ("Reshape", [np.array([1, -1])], {}),
    ]:
        (got,) = run_op(op, [y, *extra], **attrs)
        (ref,) = run_op(op, [want, *extra], **attrs)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg=op)


@needs_jit
@pytest.mark.parametrize("batch", [1, 3])
def test_fused_conv_asked_for_channels_last(batch):
    """channels_last=1 turns an ungrouped conv's GEMM to answer channels-last, with the
    same values; ONNX export drops the attribute."""
    from netbrew.converters.onnx.to_onnx import CONVERTERS
    from netbrew.netdef import op_def

    rng = np.random.default_rng(3)
    x = rng.standard_normal((batch, 3, 11, 9)).astype(np.float32)
    w = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    inputs = [x, w, b, None, np.array(0, np.float32), np.array(6, np.float32)]
    attrs = dict(activation="Clip", pads=[1, 1, 1, 1], strides=[2, 2])
    (want,) = run_op("FusedConv", inputs, **attrs)
    (got,) = run_op("FusedConv", inputs, channels_last=1, **attrs)
    assert channels_last(got) and not channels_last(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    op = op_def("FusedConv", ["x", "w", "b", "", "lo", "hi"], ["y"], channels_last=1, **attrs)
    conv = CONVERTERS["FusedConv"](op).nodes[0]
    assert conv.op_type == "Conv" and "channels_last" not in {a.name for a in conv.attribute}


@needs_jit
@pytest.mark.parametrize("op", ["Conv", "FusedConv"])
def test_strided_pointwise_conv_of_channels_last_input(op, spy):
    """ResNet's downsampling 1x1 convs (stride 2) of a channels-last X: the pixels they
    read copied as runs of channels, then the GEMM; output channels-last."""
    calls = spy(conv_last, "pointwise_rows")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 24, 9, 8)).astype(np.float32)
    w = rng.standard_normal((40, 24, 1, 1)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    inputs, attrs = [x, w, b], {"strides": [2, 3]}
    if op == "FusedConv":
        z = rng.standard_normal((2, 40, 5, 3)).astype(np.float32)
        inputs, attrs = [x, w, b, as_last(z)], {"strides": [2, 3], "activation": "Relu"}
    with jit.disabled():
        (want,) = run_op(op, inputs, **attrs)
    (got,) = run_op(op, [as_last(x), *inputs[1:]], **attrs)
    assert got.shape == (2, 40, 5, 3) and channels_last(got) and len(calls) == 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strides, pads", [((2, 2), (1, 1, 1, 1)), ((1, 1), (0, 2, 1, 0))])
def test_conv_of_channels_last_input_takes_channels_last_columns(strides, pads, monkeypatch):
    """A 3x3 conv of a channels-last X (ResNet-50's 56x56 stride-2 one) reads it through
    conv_hwc's channels-last columns, its weights laid out per call, and answers
    channels-last; weights over MAX_WEIGHT_BYTES keep im2col."""
    from netbrew.operators import conv as conv_module
    from netbrew.operators import conv_hwc

    taken = []
    real = conv_module.hwc_correlate
    monkeypatch.setattr(conv_module, "hwc_correlate", lambda *args: taken.append(1) or real(*args))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 64, 11, 10))
    w = rng.standard_normal((64, 64, 3, 3)) / 24
    b = rng.standard_normal(64)
    attrs = {"strides": list(strides), "pads": list(pads)}
    (want,) = run_op("Conv", [x, w, b], **attrs)  # C order: im2col
    assert not taken and not channels_last(want)
    (got,) = run_op("ConvRelu", [as_last(x), w, b], **attrs)
    assert taken == [1] and channels_last(got)
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-9, atol=1e-9)
    monkeypatch.setattr(conv_hwc, "MAX_WEIGHT_BYTES", w.nbytes - 1)
    (got,) = run_op("Conv", [as_last(x), w, b], **attrs)
    assert taken == [1]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@needs_jit
@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_small_pointwise_output_comes_out_c_ordered(strides, monkeypatch):
    """Ungrouped 1x1 convs with few output pixels and many weights (ResNet-50's last two
    stages) run the GEMM turned, W times the image's (C, H W) view: output C-ordered, the
    residual in either layout, the same numbers."""
    monkeypatch.setattr(conv_last, "NCHW_MIN_WEIGHTS", 24 * 40)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 7, 6)).astype(np.float32)
    w = rng.standard_normal((40, 24, 1, 1)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    out = (2, 40, *[(7 - 1) // strides[0] + 1, (6 - 1) // strides[1] + 1])
    z = rng.standard_normal(out).astype(np.float32)
    attrs = {"strides": strides, "activation": "Relu"}
    with jit.disabled():
        (want,) = run_op("FusedConv", [x, w, b, z], **attrs)
    for residual in (z, as_last(z)):
        (got,) = run_op("FusedConv", [as_last(x), w, b, residual], **attrs)
        assert got.flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(conv_last, "NCHW_MIN_WEIGHTS", 24 * 40 + 1)  # fewer weights: channels-last
    (got,) = run_op("Conv", [as_last(x), w, b], strides=strides)
    assert channels_last(got)
