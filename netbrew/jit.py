"""Compiled CPU kernels through numba, with the NumPy kernel kept beside each (DESIGN §8).

A numba kernel is a plain loop, written once and compiled on its first call:

    from netbrew import jit

    @jit.kernel
    def _relu_rows(x, out):
        for i in jit.prange(x.shape[0]):      # parallel over the cores, without the GIL
            for j in range(x.shape[1]):
                out[i, j] = max(x[i, j], 0.0)

    def relu_cpu(x):
        if jit.enabled():
            out = np.empty_like(x); _relu_rows(x, out); return out
        return np.maximum(x, 0)              # the fallback, and the oracle in tests

Kernels compile with `cache=True`, so the cost is paid once per install: later processes
load the machine code from numba's cache (`__pycache__` beside the module, or
NUMBA_CACHE_DIR). `compile_seconds()` says how long this process has spent compiling or
loading, which `netbrew bench` reports apart from run time.

The NumPy kernels run instead when numba is not installed, when NETBREW_JIT=0 is set before
netbrew is imported, or inside `with jit.disabled():`, which tests use to compare the two.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from netbrew import blas_pool

_WANT_JIT = os.environ.get("NETBREW_JIT", "1") != "0"

# Where OpenBLAS's threaded jobs run on numba's OpenMP threads (netbrew.blas_pool), those
# threads spin briefly after each region (GOMP_SPINCOUNT 10000, some tens of
# microseconds), so the next GEMM or parallel kernel starts at once; GNU OpenMP's default
# (300000) kept them spinning on the cores that a training step's batch parts need
# (ResNet-18's step 990 ms against 746). Elsewhere they would spin on the cores OpenBLAS's
# own threads need for the next GEMM, and passive waiting gives them back at once
# (densenet121 through the backend, 2 cores, medians: NETBREW_JIT=0 1215 ms; numba with
# OpenMP's default wait beside OpenBLAS's threads 6648 ms; passive 701-2335 ms, on a loaded
# machine). Both must be set before OpenMP starts; values the user set are kept.
if _WANT_JIT and blas_pool.wanted() and blas_pool.supported():
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
else:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

try:
    import numba
except ImportError:  # numba is a core dependency, but a broken install must not stop netbrew
    numba = None

_ENABLED = numba is not None and _WANT_JIT
_local = threading.local()
_compile_seconds = 0.0
_compile_lock = threading.Lock()

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
"""The dtypes the float kernels are compiled for; others take the NumPy path."""

prange = numba.prange if numba is not None else range
"""`range` whose iterations a `parallel` kernel spreads over the cores."""


def available() -> bool:
    """Whether numba can be imported at all."""
    return numba is not None


def enabled() -> bool:
    """Whether ops should call their numba kernels now: numba is installed, NETBREW_JIT is
    not 0, and the calling thread is not inside `disabled()`."""
    return _ENABLED and not getattr(_local, "off", False)


def one_thread() -> contextlib.AbstractContextManager[None]:
    """Inside the block, kernels called on this thread run their one-thread twins
    (`Kernel.serial`): for work that is already split over the cores by its caller."""
    return _thread_flag("serial")


def disabled() -> contextlib.AbstractContextManager[None]:
    """Run the NumPy kernels on this thread inside the block (for tests and measurements)."""
    return _thread_flag("off")


@contextlib.contextmanager
def _thread_flag(name: str) -> Iterator[None]:
    before = getattr(_local, name, False)
    setattr(_local, name, True)
    try:
        yield
    finally:
        setattr(_local, name, before)


def compile_seconds() -> float:
    """Seconds this process has spent compiling numba kernels or loading them from cache."""
    return _compile_seconds


PICK_SCALE = 16
"""How much lower `Kernel.pick`'s parallel thresholds are while netbrew.blas_pool is
installed."""


class Kernel:
    """A numba dispatcher that counts the time of calls that compile a new signature.

    `kernel.serial` is the same loop compiled with `parallel=False`, for calls too small to
    pay for waking the other threads (a parallel region costs tens of microseconds when
    OpenMP's threads wait passively)."""

    def __init__(self, fn: Callable, **options: Any) -> None:
        self.py_func = fn
        self.options = options
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self._dispatcher = numba.njit(cache=True, nogil=True, **options)(fn) if numba else None

    @functools.cached_property
    def serial(self) -> Kernel:
        if not self.options.get("parallel"):
            return self
        fn = self.py_func
        # A renamed copy: numba's cache names its files by qualified name, and two
        # dispatchers of one function with different options would share them.
        twin = types.FunctionType(
            fn.__code__, fn.__globals__, fn.__name__ + "_serial", fn.__defaults__, fn.__closure__
        )
        twin.__qualname__ = fn.__qualname__ + "_serial"
        twin.__module__ = fn.__module__
        twin.__doc__ = fn.__doc__
        return Kernel(twin, **{**self.options, "parallel": False})

    def pick(self, work: int, least: int) -> Kernel:
        """This kernel, or its one-thread twin where `work` is under `least`: a floor set
        for OpenMP threads that sleep between kernels, divided by PICK_SCALE while
        OpenBLAS's jobs run on the same threads (netbrew.blas_pool), which then spin
        briefly after each region and start the next in microseconds."""
        if blas_pool.installed():
            least //= PICK_SCALE
        return self if work >= least else self.serial

    def __call__(self, *args: Any) -> Any:
        if not _pool_started:
            _start_pool()
        if getattr(_local, "serial", False) and self.options.get("parallel"):
            return self.serial(*args)
        dispatcher = self._dispatcher
        if dispatcher is None:
            raise RuntimeError(f"numba kernel {self.__name__} called without numba installed")
        # `overloads` is a dict; `signatures` builds a list and hashes every type in it
        # (about 3 us a call, most of a small kernel's dispatch).
        known = len(dispatcher.overloads)
        start = time.perf_counter()
        result = dispatcher(*args)
        if len(dispatcher.overloads) != known:  # this call compiled (or loaded) a signature
            global _compile_seconds
            with _compile_lock:
                _compile_seconds += time.perf_counter() - start
        return result


_pool_started = False


def _start_pool() -> None:
    """Hands OpenBLAS's threaded jobs to numba's threads (netbrew.blas_pool) before the
    first kernel runs: starting numba's threads takes about 0.3 s, paid here and not at
    import."""
    global _pool_started
    blas_pool.install()
    _pool_started = True


def kernel(
    fn: Callable | None = None,
    *,
    parallel: bool = True,
    fastmath: bool | set[str] = False,
    error_model: str = "python",
):
    """Decorate a plain-loop function as a numba kernel (`@jit.kernel` or
    `@jit.kernel(parallel=False)`). `parallel` lets `jit.prange` loops run on all cores;
    `fastmath` allows reassociating float sums (leave it off where the NumPy kernel is an
    exact oracle), or names LLVM's flags ({"reassoc", "contract"}); `error_model="numpy"`
    lets x / 0 give inf or nan as NumPy does, where Python's model raises, and so tests
    every division, which keeps loops with one from vectorizing."""

    def wrap(f: Callable) -> Kernel:
        return Kernel(f, parallel=parallel, fastmath=fastmath, error_model=error_model)

    return wrap(fn) if fn is not None else wrap


def helper(fn: Callable) -> Callable:
    """A small function that kernels call, inlined into them by numba; the plain Python
    function where numba is missing."""
    return numba.njit(inline="always", cache=True, nogil=True)(fn) if numba else fn


@helper
def clamp(v, lo, hi):
    """v limited to [lo, hi]; a NaN stays NaN, as through np.maximum / np.minimum."""
    if v < lo:
        v = lo
    if v > hi:
        v = hi
    return v
