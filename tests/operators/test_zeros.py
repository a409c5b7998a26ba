"""The shared zero map and the relu built on it: bit-identical to np.maximum(x, 0)."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew.operators.zeros import relu, zeros_in_layout, zeros_like_shared


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int8])
def test_relu_bit_identical_to_scalar_maximum(dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 50, 7)) * 5).astype(dtype)
    if x.dtype.kind == "f":
        x[0, 0, :3] = [np.nan, -0.0, -np.inf]
    want = np.maximum(x, 0)
    got = relu(x)
    assert got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()
    strided = x[:, ::3, 1:]
    assert relu(strided).tobytes() == np.maximum(strided, 0).tobytes()
    buf = x.copy()
    assert relu(buf, out=buf) is buf and buf.tobytes() == want.tobytes()


def test_relu_unsigned_and_bool_fall_back():
    u = np.array([0, 3, 250], np.uint8)
    np.testing.assert_array_equal(relu(u), u)
    assert relu(np.array([True, False])).tolist() == [True, False]


def test_zeros_are_shared_read_only_and_grow():
    small = zeros_like_shared((4, 5), np.float32)
    assert small.shape == (4, 5) and not small.any() and not small.flags.writeable
    big = zeros_like_shared((3, 1 << 20), np.float64)  # 24 MiB: past the first map
    assert big.shape == (3, 1 << 20) and not big[:, ::4096].any()
    with pytest.raises(ValueError):
        small[0, 0] = 1.0


def test_zeros_follow_a_channels_last_layout():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 8)).astype(np.float32).transpose(0, 3, 1, 2)  # NHWC memory
    zeros = zeros_in_layout(x)
    assert zeros.shape == x.shape and not zeros.any()
    assert np.argsort(zeros.strides).tolist() == np.argsort(x.strides).tolist()  # same walk order
    assert zeros_in_layout(np.ones((3, 4))).flags.c_contiguous
    want = np.maximum(x, 0)
    buf = x.copy(order="K")
    assert relu(buf, out=buf) is buf and np.array_equal(buf, want)
    assert relu(x).tobytes() == want.tobytes()
