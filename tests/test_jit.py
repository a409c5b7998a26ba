"""netbrew.jit: numba kernels compile, count their compile time, and step aside when off."""

import numpy as np
import pytest

from netbrew import jit

pytestmark = pytest.mark.skipif(not jit.available(), reason="numba is not installed")


@jit.kernel
def _double_rows(x, out):
    for i in jit.prange(x.shape[0]):
        for j in range(x.shape[1]):
            out[i, j] = 2.0 * x[i, j]


def test_kernel_runs_and_counts_compile_time_once_per_signature():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.empty_like(x)
    before = jit.compile_seconds()
    _double_rows(x, out)
    np.testing.assert_array_equal(out, 2 * x)
    first = jit.compile_seconds()
    assert first > before
    _double_rows(x + 1, out)
    np.testing.assert_array_equal(out, 2 * (x + 1))
    assert jit.compile_seconds() == first  # same signature: no new compile


def test_disabled_is_per_thread_and_restores():
    assert jit.enabled() == (jit.available() and jit._ENABLED)
    with jit.disabled():
        assert not jit.enabled()
        with jit.disabled():
            assert not jit.enabled()
        assert not jit.enabled()
    assert jit.enabled() == jit._ENABLED


def test_serial_twin_gives_the_same_numbers_and_caches_apart():
    x = np.arange(20, dtype=np.float64).reshape(4, 5)
    out, twin_out = np.empty_like(x), np.empty_like(x)
    _double_rows(x, out)
    serial = _double_rows.serial
    assert serial is _double_rows.serial and serial.options["parallel"] is False
    assert _double_rows.options["parallel"] is True
    serial(x, twin_out)
    np.testing.assert_array_equal(out, twin_out)
    assert serial.py_func.__qualname__ != _double_rows.py_func.__qualname__
    assert serial.serial is serial
