"""Winograd F(2x2, 3x3) convolution and the ConvWinograd ops (on either transform), against
the direct Conv; the channels-last engine both tilings share (winograd_tiles)."""

import numpy as np
import onnx
import pytest

from netbrew.converters.onnx.to_onnx import CONVERTERS
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.operators import conv_winograd as cw
from netbrew.operators import conv_winograd4 as cw4
from netbrew.operators.conv_columns import correlate_columns
from netbrew.operators.window import make_window
from netbrew.testing import rand, run_op

SHAPES = [  # (N, C, H, W), M, pads (top, left, bottom, right)
    ((1, 3, 8, 8), 4, (1, 1, 1, 1)),
    ((2, 5, 7, 9), 3, (1, 1, 1, 1)),  # odd output sizes: half-used edge tiles
    ((1, 4, 6, 5), 2, (0, 0, 0, 0)),
    ((1, 2, 6, 6), 3, (2, 0, 0, 2)),  # asymmetric pads
    ((1, 3, 3, 3), 2, (0, 1, 0, 1)),  # a single output row
    ((1, 6, 11, 4), 5, (3, 2, 1, 0)),
    ((1, 8, 17, 13), 6, (1, 1, 1, 1)),  # several tile rows and columns, both cropped
]


def _direct(x, w, b, pads):
    """The conv by im2col + GEMM (plain Conv may take Winograd too, see conv.winograd)."""
    win = make_window(x.shape[2:], w.shape[2:], None, None, list(pads))
    return correlate_columns(x, w, win, 1, b)


def _channels_last(x):
    """x with the same values, laid out (N, H, W, C) in memory."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def _is_channels_last(y):
    return y.transpose(0, 2, 3, 1).flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, m, pads", SHAPES)
@pytest.mark.parametrize("tile", [2, 4])
def test_winograd_matches_direct_conv(x_shape, m, pads, dtype, tile):
    """Both transforms, on input in either memory layout; the output is channels-last."""
    tol = 1e-12 if dtype == np.float64 else (2e-5 if tile == 2 else 1e-4)
    x = rand(*x_shape, seed=1, dtype=dtype)
    w = rand(m, x_shape[1], 3, 3, seed=2, dtype=dtype)
    b = rand(m, seed=3, dtype=dtype)
    want = _direct(x, w, b, pads)
    if tile == 2:
        u, correlate = cw.winograd_weights(w), cw.winograd_correlate
    else:
        u, correlate = cw4.winograd4_weights(w), cw4.winograd4_correlate
    assert u.shape == ((tile + 2) ** 2, x_shape[1], m) and u.dtype == dtype
    for layout in (x, _channels_last(x)):
        got = correlate(layout, u, pads, b)
        assert got.shape == want.shape and got.dtype == dtype
        assert _is_channels_last(got)
        np.testing.assert_allclose(got, want, atol=tol, rtol=tol)
    relu = correlate(x, u, pads, None, relu=True)
    np.testing.assert_allclose(relu, np.maximum(want - b.reshape(-1, 1, 1), 0), atol=tol)


def test_strips_give_the_same_result(monkeypatch):
    """A big image runs a strip of tile rows at a time; force strips of one and two rows."""
    x, w, b = rand(2, 4, 13, 10, seed=4), rand(3, 4, 3, 3, seed=5), rand(3, seed=6)
    u = cw.winograd_weights(w)
    whole = cw.winograd_correlate(x, u, (1, 1, 1, 1), b, relu=True)
    for rows in (1, 2):
        monkeypatch.setattr(cw, "STRIP_ELEMENTS", rows * 16 * 5 * 4)  # 5 tiles a row, C=4
        np.testing.assert_array_equal(cw.winograd_correlate(x, u, (1, 1, 1, 1), b, True), whole)
    np.testing.assert_allclose(whole, np.maximum(_direct(x, w, b, (1, 1, 1, 1)), 0), atol=2e-5)


@pytest.mark.parametrize("tile", [2, 4])
def test_weight_transform_is_g_w_gt(tile):
    """U holds entry (a, b) of G g G^T, g = w[m, c], G Lavin and Gray's 4x3 (6x3 for
    F(4x4)), at U[p b + a][c, m] (p = 4, 6)."""
    w = rand(5, 7, 3, 3, seed=7, dtype=np.float64)
    if tile == 2:
        u, g, matches = cw.winograd_weights(w), cw.F2.g, cw.transform_matches
    else:
        u, g, matches = cw4.winograd4_weights(w), cw4.F4.g, cw4.transform4_matches
    for m, c in [(0, 0), (4, 6), (2, 3)]:
        got = u[:, c, m].reshape(tile + 2, tile + 2).T
        np.testing.assert_allclose(got, g @ w[m, c] @ g.T, atol=1e-14)
    assert matches(w, u)
    assert not matches(w + 1, u)
    make = cw.winograd_weights if tile == 2 else cw4.winograd4_weights
    with pytest.raises(ValueError, match=r"expected weights \(M, C, 3, 3\), got \(5, 7, 5, 5\)"):
        make(rand(5, 7, 5, 5))


def test_use_winograd_rule():
    assert cw.use_winograd(256, 256, (14, 14))  # ResNet-50's fourth stage: 7 x 7 tiles
    assert cw.use_winograd(96, 208, (14, 14))  # Inception's
    assert cw.use_winograd(512, 512, (14, 14))  # VGG-19's last convs
    assert not cw.use_winograd(512, 512, (7, 7))  # 4 x 4 tiles: too few
    assert not cw.use_winograd(64, 256, (13, 13))  # squeezenet's: 6 x 6 full tiles
    assert not cw.use_winograd(32, 4096, (224, 224))  # too few channels on one side
    # a batch of 4 or more goes a few images a step: 8x8 outputs pay, 4x4 ones do not
    assert cw.use_winograd(256, 256, (8, 8), images=16)
    assert not cw.use_winograd(256, 256, (8, 8), images=2)
    assert not cw.use_winograd(512, 512, (4, 4), images=16)


@pytest.mark.parametrize("op_type", ["ConvWinograd", "ConvWinogradRelu"])
@pytest.mark.parametrize("forced", [True, False])
@pytest.mark.parametrize("tile", [2, 4])
def test_op_equals_conv_on_both_paths(op_type, forced, tile, monkeypatch):
    """The op runs the Winograd path its transform U is for (F(2x2), or F(4x4) given U of
    shape (36, C, M)) where `use_winograd` (`use_winograd4`) says, Conv elsewhere: the
    same numbers either way."""
    suffix = "4" if tile == 4 else ""
    transform = cw4.winograd4_weights if tile == 4 else cw.winograd_weights
    calls = []
    real = getattr(cw, f"winograd{suffix}_correlate")
    monkeypatch.setattr(cw, f"use_winograd{suffix}", lambda *a: forced)
    monkeypatch.setattr(cw, f"winograd{suffix}_correlate", lambda *a: calls.append(1) or real(*a))
    x, w, b = rand(2, 4, 9, 8, seed=8), rand(6, 4, 3, 3, seed=9), rand(6, seed=10)
    want = _direct(x, w, b, (1, 1, 1, 1))
    if op_type.endswith("Relu"):
        want = np.maximum(want, 0)
    (got,) = run_op(op_type, [x, w, transform(w), b], pads=[1, 1, 1, 1])
    np.testing.assert_allclose(got, want, atol=1e-4)
    assert len(calls) == int(forced)
    (same,) = run_op(op_type, [x, w, transform(w)], auto_pad="SAME_UPPER")
    (want_same,) = run_op("Conv", [x, w], auto_pad="SAME_UPPER")
    if op_type.endswith("Relu"):
        want_same = np.maximum(want_same, 0)
    np.testing.assert_allclose(same, want_same, atol=2e-5)


def test_stale_transform_falls_back_to_the_weights(monkeypatch):
    """A weight fed after the pass made U no longer matches it: the op runs as Conv."""
    monkeypatch.setattr(cw, "use_winograd", lambda *a: True)
    x, w, b = rand(1, 4, 8, 8, seed=11), rand(5, 4, 3, 3, seed=12), rand(5, seed=13)
    old_u = cw.winograd_weights(rand(5, 4, 3, 3, seed=14))
    (got,) = run_op("ConvWinograd", [x, w, old_u, b], pads=[1, 1, 1, 1])
    np.testing.assert_allclose(got, _direct(x, w, b, (1, 1, 1, 1)), atol=2e-5)


def test_strided_or_grouped_attrs_run_as_conv(monkeypatch):
    monkeypatch.setattr(cw, "use_winograd", lambda *a: True)
    x, w = rand(1, 4, 9, 9, seed=15), rand(4, 4, 3, 3, seed=16)
    u = cw.winograd_weights(w)
    for attrs in ({"strides": [2, 2]}, {"dilations": [2, 2]}, {"pads": [0, 0, 0, 0]}):
        (got,) = run_op("ConvWinograd", [x, w, u], **attrs)
        np.testing.assert_allclose(got, run_op("Conv", [x, w], **attrs)[0], atol=2e-5)


def test_bad_input_names_the_op():
    from netbrew.errors import OperatorError

    x, w = rand(1, 3, 8, 8), rand(4, 4, 3, 3)
    with pytest.raises(
        OperatorError, match=r"ConvWinograd.*input X has C=3 channels but W expects"
    ):
        run_op("ConvWinograd", [x, w, cw.winograd_weights(w)], pads=[1, 1, 1, 1])


@pytest.mark.parametrize("op_type", ["ConvWinograd", "ConvWinogradRelu"])
def test_gradient_and_export_as_conv(op_type):
    assert callable(GRADIENTS[op_type])  # checked in test_fused_grad.py
    op = op_def(op_type, ["x", "w", "w__winograd", "b"], ["y"], pads=[1, 1, 1, 1])
    nodes = CONVERTERS[op_type](op).nodes
    assert nodes[0].op_type == "Conv" and list(nodes[0].input) == ["x", "w", "b"]
    assert [n.op_type for n in nodes] == (
        ["Conv", "Relu"] if op_type.endswith("Relu") else ["Conv"]
    )
    assert nodes[-1].output == ["y"]
    for node in nodes:
        onnx.checker.check_node(node)


@pytest.mark.parametrize("tile", ["F2", "F4"])
@pytest.mark.parametrize("relu, with_bias", [(True, True), (False, True), (False, False)])
def test_tiles_placed_by_numba_equal_numpy(tile, relu, with_bias, monkeypatch):
    """winograd_tiles._place_tiles (the output tiles, bias and Relu in one pass) against
    NumPy's copy then Relu: two images, odd sizes whose last tiles are cut at the edge."""
    from netbrew import jit
    from netbrew.operators import winograd_tiles as wt

    if not jit.enabled():
        pytest.skip("numba is off")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 11, 9)).astype(np.float32)
    w = rng.standard_normal((5, 6, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32) if with_bias else None
    tiling, u = (
        (cw.F2, cw.winograd_weights(w)) if tile == "F2" else (cw4.F4, cw4.winograd4_weights(w))
    )
    got = wt.tiled_correlate(x, u, (1, 0, 2, 1), tiling, 1 << 21, b, relu)
    monkeypatch.setattr(wt, "PLACE_TILES_JIT", False)
    want = wt.tiled_correlate(x, u, (1, 0, 2, 1), tiling, 1 << 21, b, relu)
    assert got.shape == want.shape == (2, 5, 12, 8)
    np.testing.assert_array_equal(got, want)
    assert (got < 0).any() != relu


@pytest.mark.parametrize("tile", ["F2", "F4"])
def test_column_transform_by_numba_equals_numpy(tile, monkeypatch):
    """The input transform's column step in winograd_tiles._transform_columns (128 channels
    and up) against the gather copy and GEMM it replaces: two images, odd sizes, uneven
    pads."""
    from netbrew import jit
    from netbrew.operators import winograd_tiles as wt

    if not jit.enabled():
        pytest.skip("numba is off")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 128, 9, 7)).astype(np.float32)
    w = (rng.standard_normal((8, 128, 3, 3)) / 30).astype(np.float32)
    tiling, u = (
        (cw.F2, cw.winograd_weights(w)) if tile == "F2" else (cw4.F4, cw4.winograd4_weights(w))
    )
    got = wt.tiled_correlate(x, u, (0, 1, 2, 1), tiling, 1 << 21)
    monkeypatch.setattr(wt, "COLUMNS_JIT_MIN_CHANNELS", 1 << 30)
    want = wt.tiled_correlate(x, u, (0, 1, 2, 1), tiling, 1 << 21)
    assert got.shape == want.shape == (2, 8, 9, 7)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
