"""Winograd F(4x4, 3x3): its accuracy, strips, rule, stale-transform fallback and the ops
that read its channels-last output. (Its match with the direct Conv, its weight transform
and the ConvWinograd op on it are tested with F(2x2)'s in test_conv_winograd.py.)"""

import numpy as np
import pytest

from netbrew.operators import conv_winograd as cw
from netbrew.operators import conv_winograd4 as cw4
from netbrew.testing import rand, run_op
from tests.operators.test_conv_winograd import _direct, _is_channels_last


def test_error_stays_small_on_a_wide_conv():
    """The transforms scale by up to 8 and 1/24: on a 256-channel sum the float32 result
    stays within 2e-5 of the output's largest value (the float64 direct conv as the truth;
    measured 1.1e-5, where the float32 direct conv is off by 4e-7)."""
    x, w = rand(1, 256, 12, 12, seed=4), rand(64, 256, 3, 3, seed=5)
    truth = _direct(x.astype(np.float64), w.astype(np.float64), None, (1, 1, 1, 1))
    got = cw4.winograd4_correlate(x, cw4.winograd4_weights(w), (1, 1, 1, 1))
    assert np.abs(got - truth).max() <= 2e-5 * np.abs(truth).max()


def test_strips_give_the_same_result(monkeypatch):
    """A big image runs a strip of tile rows at a time; force strips of one and two rows."""
    x, w, b = rand(2, 4, 17, 10, seed=6), rand(3, 4, 3, 3, seed=7), rand(3, seed=8)
    u = cw4.winograd4_weights(w)
    whole = cw4.winograd4_correlate(x, u, (1, 1, 1, 1), b, relu=True)
    for rows in (1, 2):
        monkeypatch.setattr(cw4, "STRIP_ELEMENTS", rows * 36 * 3 * 4)  # 3 tiles a row, C=4
        np.testing.assert_array_equal(cw4.winograd4_correlate(x, u, (1, 1, 1, 1), b, True), whole)
    np.testing.assert_allclose(whole, np.maximum(_direct(x, w, b, (1, 1, 1, 1)), 0), atol=1e-4)


def test_use_winograd4_rule():
    assert cw4.use_winograd4(64, 64, (56, 56))  # ResNet-50's first stage
    assert cw4.use_winograd4(128, 128, (28, 28))
    assert cw4.use_winograd4(96, 128, (27, 27))  # Inception's: 7 x 7 tiles
    assert not cw4.use_winograd4(256, 256, (14, 14))  # 4 x 4 tiles: measured slower
    assert not cw4.use_winograd4(32, 128, (56, 56))  # too few channels on one side
    # a batch goes a few images a step: ResNet-18's 16x16 convs pay, its 8x8 ones do not
    assert cw4.use_winograd4(128, 128, (16, 16), images=16)
    assert not cw4.use_winograd4(128, 128, (16, 16), images=1)
    assert not cw4.use_winograd4(256, 256, (8, 8), images=16)


def test_stale_f4_transform_falls_back_to_the_weights(monkeypatch):
    monkeypatch.setattr(cw, "use_winograd4", lambda *a: True)
    x, w, b = rand(1, 4, 8, 8, seed=13), rand(5, 4, 3, 3, seed=14), rand(5, seed=15)
    old_u = cw4.winograd4_weights(rand(5, 4, 3, 3, seed=16))
    (got,) = run_op("ConvWinograd", [x, w, old_u, b], pads=[1, 1, 1, 1])
    np.testing.assert_allclose(got, _direct(x, w, b, (1, 1, 1, 1)), atol=2e-5)


def _consumers():
    """(op type, extra inputs, attributes) of ops that meet a conv's output in real nets."""
    c = 8
    return [
        ("Relu", [], {}),
        ("Add", [rand(1, c, 1, 1, seed=20)], {}),
        ("MaxPool", [], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("AveragePool", [], {"kernel_shape": [2, 2], "strides": [2, 2]}),
        ("GlobalAveragePool", [], {}),
        ("Conv", [rand(5, c, 1, 1, seed=21)], {}),
        ("Conv", [rand(6, c, 3, 3, seed=22)], {"pads": [1, 1, 1, 1]}),
        ("Conv", [rand(6, c // 2, 3, 3, seed=23)], {"group": 2, "strides": [2, 2]}),
        ("Conv", [rand(c, 1, 3, 3, seed=24)], {"group": c, "pads": [1, 1, 1, 1]}),
        ("Flatten", [], {"axis": 1}),
        ("Transpose", [], {"perm": [0, 2, 3, 1]}),
        ("Softmax", [], {"axis": 1}),
        ("LRN", [], {"size": 3}),
        ("BatchNormalization", [rand(c, seed=s) for s in (25, 26, 27)] + [rand(c) + 2], {}),
    ]


@pytest.mark.parametrize("op_type, extra, attrs", _consumers(), ids=lambda v: str(v)[:20])
def test_channels_last_output_feeds_other_ops(op_type, extra, attrs):
    """Ops after an F(4x4) conv read its channels-last output: the same numbers as from the
    same values laid out (N, C, H, W)."""
    x, w = rand(1, 8, 12, 12, seed=17), rand(8, 8, 3, 3, seed=18)
    y = cw4.winograd4_correlate(x, cw4.winograd4_weights(w), (1, 1, 1, 1))
    assert _is_channels_last(y)
    want = run_op(op_type, [np.ascontiguousarray(y), *extra], **attrs)
    got = run_op(op_type, [y, *extra], **attrs)
    for g, e in zip(got, want):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_concat_of_both_layouts():
    x, w = rand(1, 8, 12, 12, seed=19), rand(8, 8, 3, 3, seed=28)
    y = cw4.winograd4_correlate(x, cw4.winograd4_weights(w), (1, 1, 1, 1))
    other = rand(1, 3, 12, 12, seed=29)
    (got,) = run_op("Concat", [y, other], axis=1)
    np.testing.assert_array_equal(got, np.concatenate([np.ascontiguousarray(y), other], 1))


@pytest.mark.parametrize("module, weights", [(cw, "winograd_weights"), (cw4, "winograd4_weights")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numba_weight_transform_matches_einsum(module, weights, dtype):
    """The loop that transforms a training step's weights (JIT on) gives einsum's U."""
    from netbrew import jit

    w = np.random.default_rng(9).standard_normal((70, 66, 3, 3)).astype(dtype)
    got = getattr(module, weights)(w)
    with jit.disabled():
        want = getattr(module, weights)(w)
    assert got.shape == want.shape and got.dtype == want.dtype == dtype
    assert got.flags.c_contiguous
    tol = 1e-6 if dtype == np.float32 else 1e-14  # of U's largest value: sums cancel
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * np.abs(want).max())


@pytest.mark.parametrize(
    "module, correlate, weights, products",
    [
        (cw, "winograd_correlate", "winograd_weights", 16),
        (cw4, "winograd4_correlate", "winograd4_weights", 36),
    ],
)
def test_several_images_a_step_give_one_image_a_steps_result(
    monkeypatch, module, correlate, weights, products
):
    """Small images go a few at a time (winograd_tiles.BLOCK_PRODUCTS), odd sizes and a
    batch that does not divide evenly included; the result is the same as one at a time."""
    from netbrew.operators import winograd_tiles

    x, w, b = rand(7, 5, 9, 6, seed=16), rand(4, 5, 3, 3, seed=17), rand(4, seed=18)
    u = getattr(module, weights)(w)
    run = getattr(module, correlate)
    monkeypatch.setattr(winograd_tiles, "BLOCK_PRODUCTS", 1)  # one image a step
    single = run(x, u, (1, 0, 2, 1), b, True)
    monkeypatch.setattr(winograd_tiles, "BLOCK_PRODUCTS", products * 30)  # 2 or 5 images
    batched = run(x, u, (1, 0, 2, 1), b, True)
    np.testing.assert_allclose(batched, single, rtol=1e-6, atol=1e-6)
    truth = np.maximum(_direct(x, w, b, (1, 0, 2, 1)), 0)
    np.testing.assert_allclose(batched, truth, atol=1e-4)
