"""window.scratch: per-thread reusable temporaries."""

import threading

import numpy as np

from netbrew.operators import window


def test_scratch_is_reused_and_grown():
    a = window.scratch("test_a", (3, 5), np.float32)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    a[...] = 1.0
    b = window.scratch("test_a", (2, 7), np.float64)  # the same buffer, seen anew
    assert np.shares_memory(a, b)
    big = window.scratch("test_a", (1 << 16, 3), np.float32)  # outgrows it: a new buffer
    assert big.shape == (1 << 16, 3) and not np.shares_memory(a, big)
    assert not np.shares_memory(window.scratch("test_b", (4,), np.float32), big)


def test_scratch_is_per_thread():
    mine = window.scratch("test_c", (8,), np.float32)
    seen = []
    thread = threading.Thread(
        target=lambda: seen.append(window.scratch("test_c", (8,), np.float32))
    )
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, seen[0])


def test_scratch_above_the_cap_is_a_fresh_array(monkeypatch):
    monkeypatch.setattr(window, "_SCRATCH_MAX", 64)
    a = window.scratch("test_d", (100,), np.float32)
    b = window.scratch("test_d", (100,), np.float32)
    assert a.shape == (100,) and not np.shares_memory(a, b)
