"""Conv's batch split over the cores (netbrew.operators.batch_split): the same numbers as
the whole batch, BLAS's thread count back afterwards, errors passed on, JIT state kept."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import batch_split
from netbrew.operators import conv as conv_module
from netbrew.operators.conv import conv_cpu, conv_gradient_cpu
from netbrew.operators.window import make_window


def blas_threads() -> list[int]:
    return [lib.get_num_threads() for lib in batch_split._blas()]


@pytest.fixture
def two_ways(monkeypatch):
    """Every conv that may split goes in two parts (or three where the batch allows)."""
    seen = []

    def ways(batch: int, work: int) -> int:
        parts = 1 if batch < 2 or batch_split.inside() else min(batch, 3)
        seen.append(parts)
        return parts

    monkeypatch.setattr(batch_split, "ways", ways)
    return seen


CASES = [
    # X shape, W shape, attributes: im2col, spanning forward, Winograd F(4x4), groups, 1-D
    ((4, 3, 9, 8), (5, 3, 3, 3), dict(pads=[1, 0, 1, 2], strides=[2, 1])),
    ((3, 8, 6, 6), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 64, 28, 28), (64, 64, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((5, 6, 7, 7), (6, 3, 3, 3), dict(group=2, dilations=[2, 1])),
    ((3, 4, 11), (6, 4, 3), dict(strides=[2], pads=[1, 1])),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", CASES)
def test_split_matches_whole_batch(two_ways, x_shape, w_shape, attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    (y,) = conv_cpu(x, w, b, **attrs)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    got = (y, *conv_gradient_cpu(x, w, dy, **attrs))
    assert 3 in two_ways or 2 in two_ways  # something split
    two_ways.clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(batch_split, "ways", lambda batch, work: 1)
        (y1,) = conv_cpu(x, w, b, **attrs)
        want = (y1, *conv_gradient_cpu(x, w, dy, **attrs))
    for name, g, e in zip(("Y", "dX", "dW", "dB"), got, want):
        assert g.shape == e.shape and g.dtype == e.dtype, name
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5 * np.abs(e).max(), err_msg=name)


def test_ways_follows_batch_work_and_blas_threads(monkeypatch):
    lib_threads = max(blas_threads())
    big = 64 * batch_split.MIN_WORK
    assert batch_split.ways(1, big) == 1  # batch 1 never splits
    assert batch_split.ways(32, batch_split.MIN_WORK) == 1  # too little work for two parts
    assert batch_split.ways(32, big) == min(lib_threads, 32)
    assert batch_split.ways(3, big) == min(lib_threads, 3)
    monkeypatch.setattr(batch_split, "_blas", lambda: [])
    assert batch_split.ways(32, big) == 1  # BLAS cannot be held at one thread


def test_blas_held_at_one_thread_inside_and_restored_after():
    before = blas_threads()
    seen = []

    def task(s):
        seen.append((s, blas_threads(), batch_split.inside(), threading.get_ident()))
        return s.stop - s.start

    assert batch_split.run(task, 7, 2) == [3, 4]
    assert sorted((s.start, s.stop) for s, *_ in seen) == [(0, 3), (3, 7)]
    assert all(threads == [1] * len(before) for _, threads, _, _ in seen)
    assert all(inside for *_, inside, _ in seen)
    assert len({ident for *_, ident in seen}) == 2  # two threads
    assert blas_threads() == before and not batch_split.inside()


def test_an_error_in_a_part_is_raised_after_every_part_ends():
    before = blas_threads()
    finished = []

    def task(s):
        if s.start == 0:
            raise ValueError("part 0 failed")
        finished.append(s)

    with pytest.raises(ValueError, match="part 0 failed"):
        batch_split.run(task, 4, 2)
    assert finished == [slice(2, 4)]
    assert blas_threads() == before


def test_parts_keep_the_callers_jit_state_and_run_kernels_on_one_thread(monkeypatch):
    states = []
    batch_split.run(lambda s: states.append(jit.enabled()), 4, 2)
    with jit.disabled():
        batch_split.run(lambda s: states.append(jit.enabled()), 4, 2)
    assert states[2:] == [False, False]
    assert states[:2] == [jit.enabled()] * 2
    if not jit.enabled():
        pytest.skip("numba is off: no kernels to run on one thread")
    calls = []
    kernel = jit.Kernel(_double, parallel=True)
    serial = kernel.serial
    monkeypatch.setattr(serial, "_dispatcher", _recording(serial._dispatcher, calls, "serial"))
    monkeypatch.setattr(kernel, "_dispatcher", _recording(kernel._dispatcher, calls, "parallel"))
    x = np.arange(8.0)
    kernel(x)
    batch_split.run(lambda s: kernel(x[s]), 8, 2)
    assert calls == ["parallel", "serial", "serial"]
    np.testing.assert_array_equal(x, np.arange(8.0) * 4)  # doubled whole, then per part


def _double(x):
    for i in jit.prange(x.shape[0]):
        x[i] *= 2.0


class _recording:
    def __init__(self, dispatcher, calls, name):
        self.dispatcher, self.calls, self.name = dispatcher, calls, name
        self.overloads = dispatcher.overloads

    def __call__(self, *args):
        self.calls.append(self.name)
        return self.dispatcher(*args)


def test_the_training_convs_of_a_batch_split_by_default():
    """A ResNet-sized conv at batch 8 splits where BLAS has two or more threads."""
    if max(blas_threads()) < 2:
        pytest.skip("one BLAS thread: nothing splits")
    win = make_window((16, 16), [3, 3], [1, 1], None, [1] * 4, "NOTSET")
    work = conv_module.macs(8, 64 * 64 * 9, win)
    assert batch_split.ways(8, work) >= 2
