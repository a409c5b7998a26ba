"""Splitting a convolution's batch over the cores, with BLAS held at one thread meanwhile.

A batched conv (a training step's forward, input and weight gradients) is a loop over its
images of copies (im2col, col2im, Winograd transforms) and GEMMs. Left to itself only the
GEMMs use both cores: OpenBLAS threads each one, and NumPy's copies run on one core. Worse,
after each threaded GEMM OpenBLAS's idle worker spins for about 2^28 cycles (its
THREAD_TIMEOUT, some 75 ms here) on the core that the next copy, numba loop or small
single-threaded GEMM could use, so in a training step that core is rarely free.

Here the images go in `ways` contiguous parts (one per BLAS thread), each part on its own
thread, and BLAS runs one thread per call for as long as any split is running: every copy
runs in parallel, no GEMM is threaded, so no worker is left spinning, and numba kernels
called inside a part run their one-thread twins (jit.Kernel) instead of waking a second
team of threads. Two parts of single-threaded SGEMM run at 1.0-1.17x the speed of one
threaded SGEMM on the conv shapes of ResNet-18 (2-core Zen 4, OpenBLAS 0.3.31).

Measured: ResNet-18's training step at batch 32 (benchmarks/train_step.py's net, in-process
A/B alternating steps, 8 pairs): 0.73-0.89x the step time, median 1023 -> 855 ms.

Nothing splits at batch 1 (inference), where an image's work alone would have to be cut
(tried, see netbrew.executor.threads: slower), under `nb.set_num_threads(1)`, or while
another split runs (the BLAS count then reads 1): a `dag` net whose workers run two convs
at once keeps one part per conv.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from netbrew import jit

MIN_WORK = 1 << 23
"""Multiply-adds a part must have, about 0.1 ms of one core's GEMM: smaller convs run whole."""

_lock = threading.Lock()
_local = threading.local()
_state: dict = {"blas": None, "pool": None, "active": 0, "saved": []}


def _blas() -> list:
    """threadpoolctl's controllers of the BLAS libraries NumPy loaded (looked up once)."""
    if _state["blas"] is None:
        from threadpoolctl import ThreadpoolController

        found = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
        _state["blas"] = found
    return _state["blas"]


def inside() -> bool:
    """Whether the calling thread is running one part of a split."""
    return getattr(_local, "inside", False)


def ways(batch: int, work: int) -> int:
    """Into how many parts a batch of `batch` images with `work` multiply-adds in all should
    go: one per BLAS thread, at most one per image, each with at least MIN_WORK; 1 (do not
    split) inside a part, while another split runs, or where BLAS cannot be controlled."""
    if batch < 2 or work < 2 * MIN_WORK or inside():
        return 1
    with _lock:
        if _state["active"]:
            return 1
    libs = _blas()
    if not libs:
        return 1
    threads = max(lib.get_num_threads() for lib in libs)
    return max(1, min(threads, batch, work // MIN_WORK))


def bounds(batch: int, parts: int) -> list[slice]:
    """`parts` contiguous slices of range(batch), as even as they come."""
    edges = [batch * i // parts for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


def run(task: Callable[[slice], object], batch: int, parts: int) -> list:
    """task(s) for each of `parts` slices of the batch, the first on this thread and the
    others on helper threads, BLAS at one thread until all are done; their results in
    order. The first exception a part raises is raised here once every part has ended."""
    slices = bounds(batch, parts)
    disabled = not jit.enabled()
    _enter()
    try:
        pool = _pool(parts - 1)
        futures: list[Future] = [pool.submit(_part, task, s, disabled) for s in slices[1:]]
        try:
            first = _part(task, slices[0], disabled)
        finally:
            for f in futures:  # wait for every part before BLAS gets its threads back
                f.exception()
        return [first] + [f.result() for f in futures]
    finally:
        _leave()


def run_into(out: np.ndarray, task: Callable[[slice], np.ndarray], parts: int) -> np.ndarray:
    """out[s] = task(s) for `parts` slices s of out's first axis, as `run` runs them (each
    part copies its own result in); returns out."""

    def part(s: slice) -> None:
        out[s] = task(s)

    run(part, out.shape[0], parts)
    return out


def _part(task: Callable[[slice], object], s: slice, jit_disabled: bool) -> object:
    _local.inside = True
    try:
        with jit.one_thread():
            if jit_disabled:
                with jit.disabled():
                    return task(s)
            return task(s)
    finally:
        _local.inside = False


def _pool(helpers: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _state["pool"]
        if pool is None or pool._max_workers < helpers:
            pool = _state["pool"] = ThreadPoolExecutor(helpers, thread_name_prefix="netbrew-batch")
        return pool


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS at one thread inside the block, as while a split runs (the two share one
    count: BLAS gets its threads back when the last of them ends)."""
    _enter()
    try:
        yield
    finally:
        _leave()


def _enter() -> None:
    with _lock:
        if _state["active"] == 0:
            libs = _blas()
            _state["saved"] = [lib.get_num_threads() for lib in libs]
            for lib in libs:
                lib.set_num_threads(1)
        _state["active"] += 1


def _leave() -> None:
    with _lock:
        _state["active"] -= 1
        if _state["active"] == 0:
            for lib, n in zip(_blas(), _state["saved"]):
                lib.set_num_threads(n)
