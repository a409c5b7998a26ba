"""conv_columns: Conv's forward, input gradient and weight gradient give the same numbers
whether the batch goes in one chunk or one image at a time (awkward shapes: groups,
strides, dilations, asymmetric pads, 1-D to 3-D, float64), and the chunks cover the batch."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew.operators import conv as conv_module
from netbrew.operators import conv_columns
from netbrew.operators.conv import conv_cpu, conv_gradient_cpu

CASES = [
    # X shape, W shape, attrs
    ((3, 4, 9, 7), (6, 4, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((3, 4, 9, 7), (6, 2, 3, 2), dict(pads=[2, 0, 1, 1], strides=[2, 1], group=2)),
    ((2, 3, 11, 10), (5, 3, 3, 3), dict(dilations=[2, 1], strides=[1, 3])),
    ((3, 6, 8, 8), (4, 6, 1, 1), dict(strides=[2, 2])),  # 1x1 stride 2
    ((3, 6, 8, 8), (4, 6, 1, 1), {}),  # 1x1: the columns are X itself
    ((3, 2, 13), (4, 2, 3), dict(pads=[1, 2])),  # 1-D
    ((2, 2, 5, 4, 6), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1])),  # 3-D
]


def _conv_and_grads(x, w, b, dy, attrs):
    (y,) = conv_cpu(x, w, b, **attrs)
    return (y, *conv_gradient_cpu(x, w, dy, output_mask=(True, True, True), **attrs))


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_image_chunks_match_one_chunk(monkeypatch, x_shape, w_shape, attrs, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    (y,) = conv_cpu(x, w, b, **attrs)
    dy = rng.standard_normal(y.shape).astype(dtype)
    for budget in ("CHUNK_BYTES", "WEIGHT_GRAD_CHUNK_BYTES"):
        monkeypatch.setattr(conv_columns, budget, 1 << 40)
    whole = _conv_and_grads(x, w, b, dy, attrs)
    for budget in ("CHUNK_BYTES", "WEIGHT_GRAD_CHUNK_BYTES"):
        monkeypatch.setattr(conv_columns, budget, 1)  # every image a chunk of its own
    split = _conv_and_grads(x, w, b, dy, attrs)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for name, a, b in zip(("Y", "dX", "dW", "dB"), whole, split):
        assert a.shape == b.shape and a.dtype == b.dtype == dtype, name
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("batch, per_image, budget", [(7, 3, 6), (5, 100, 1), (4, 1, 100)])
def test_chunks_cover_the_batch_once(monkeypatch, batch, per_image, budget):
    monkeypatch.setattr(conv_columns, "CHUNK_BYTES", budget)
    ranges = list(conv_columns.chunks(batch, per_image))
    assert ranges == list(conv_columns.chunks(batch, per_image, budget))
    assert ranges[0][0] == 0 and ranges[-1][1] == batch
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(stop - start == max(1, budget // per_image) for start, stop in ranges[:-1])


WINOGRAD_CASES = [
    # X shape, pads; 64 channels in and out, so that Winograd pays
    ((2, 64, 14, 14), [1, 1, 1, 1]),  # F(2x2)
    ((2, 64, 17, 15), [0, 2, 2, 0]),  # F(2x2), asymmetric pads, odd sizes
    ((1, 64, 27, 26), [2, 1, 0, 1]),  # F(4x4)
    ((1, 64, 28, 28), [1, 1, 1, 1]),  # F(4x4)
]


@pytest.mark.parametrize("x_shape, pads", WINOGRAD_CASES)
def test_winograd_forward_and_input_grad_match_im2col(monkeypatch, x_shape, pads):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((64, 64, 3, 3))
    b = rng.standard_normal(64)
    (y,) = conv_cpu(x, w, b, pads=pads)
    dy = rng.standard_normal(y.shape)
    calls = []
    real = conv_module.winograd

    def counted(*args):
        out = real(*args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(conv_module, "winograd", counted)
    got = _conv_and_grads(x, w, b, dy, dict(pads=pads))
    assert len(calls) >= 2 and all(calls)  # the forward and dX (or each part of them) took it
    monkeypatch.setattr(conv_module, "winograd", lambda *args: None)
    want = _conv_and_grads(x, w, b, dy, dict(pads=pads))
    for name, g, e in zip(("Y", "dX", "dW", "dB"), got, want):
        assert g.shape == e.shape, name
        assert g.flags.c_contiguous or name == "dW", name
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9, err_msg=name)


@pytest.mark.parametrize(
    "x_shape, w_shape, attrs",
    [
        ((3, 4, 6, 5), (5, 4, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
        ((4, 3, 7, 7), (6, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
        ((2, 5, 9), (4, 5, 3), {"strides": [2], "pads": [1, 1]}),  # 1-D
        ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),  # 3-D
        ((5, 8, 4, 4), (16, 8, 1, 1), {}),  # 1x1
    ],
)
def test_spanning_forward_matches_per_image_gemms(x_shape, w_shape, attrs, monkeypatch):
    """A batch's small-output forward multiplies one GEMM over the chunk's images; the
    per-image GEMMs give the same numbers, whatever the chunking."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    calls = []
    real = conv_columns._spanning_forward
    monkeypatch.setattr(conv_columns, "_spanning_forward", lambda *a: calls.append(1) or real(*a))
    (few_channels,) = conv_cpu(x, w, b, **attrs)
    assert not calls  # under SPAN_MIN_CHANNELS: per-image GEMMs
    monkeypatch.setattr(conv_columns, "SPAN_MIN_CHANNELS", 1)
    (got,) = conv_cpu(x, w, b, **attrs)
    monkeypatch.setattr(conv_columns, "CHUNK_BYTES", 1)  # one image a chunk
    (chunked,) = conv_cpu(x, w, b, **attrs)
    assert len(calls) == 2
    monkeypatch.setattr(conv_columns, "SPAN_MAX_POSITIONS", 0)
    (want,) = conv_cpu(x, w, b, **attrs)
    assert len(calls) == 2
    np.testing.assert_allclose(few_channels, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(chunked, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "x_shape, pads",
    [((3, 8, 4, 4), [1, 1, 1, 1]), ((2, 8, 5, 4), [0, 2, 2, 0]), ((4, 16, 8, 8), [1, 1, 1, 1])],
)
def test_small_images_input_grad_by_the_flipped_spanning_conv(monkeypatch, x_shape, pads):
    """ResNet's 4x4 and 8x8 convs: dX as a 3x3 conv of dY with W flipped, through
    correlate_columns (one GEMM over the images), matches col2im's dX."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((x_shape[1] + 2, x_shape[1], 3, 3))
    (y,) = conv_cpu(x, w, None, pads=pads)
    dy = rng.standard_normal(y.shape)
    calls = []
    real = conv_module.correlate_columns

    def counted(*args):
        calls.append(args[0].shape)
        return real(*args)

    monkeypatch.setattr(conv_module, "correlate_columns", counted)
    (few,) = conv_gradient_cpu(x, w, dy, output_mask=(True, False, False), pads=pads)[:1]
    assert not calls  # under SPAN_MIN_CHANNELS channels: col2im
    monkeypatch.setattr(conv_columns, "SPAN_MIN_CHANNELS", x_shape[1])
    (got,) = conv_gradient_cpu(x, w, dy, output_mask=(True, False, False), pads=pads)[:1]
    assert calls and all(shape[1] == w.shape[0] for shape in calls)  # convs of dY
    monkeypatch.setattr(conv_columns, "SPAN_MAX_POSITIONS", 0)  # col2im instead
    calls.clear()
    (want,) = conv_gradient_cpu(x, w, dy, output_mask=(True, False, False), pads=pads)[:1]
    assert not calls
    assert got.shape == want.shape == few.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(few, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES[:3])
def test_weight_grad_gemm_orders_agree(monkeypatch, x_shape, w_shape, attrs):
    """The weight gradient's GEMM, columns first (few output channels) or dY's rows first
    (many), gives the same dW."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    (y,) = conv_cpu(x, w, None, **attrs)
    dy = rng.standard_normal(y.shape)
    grads = []
    for below in (1 << 30, 0):
        monkeypatch.setattr(conv_columns, "COLUMNS_FIRST_BELOW", below)
        dw = conv_gradient_cpu(x, w, dy, output_mask=(False, True, False), **attrs)[1]
        assert dw.shape == w.shape and dw.flags.c_contiguous
        grads.append(dw)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10, atol=1e-10)
