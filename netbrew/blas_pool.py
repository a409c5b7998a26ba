"""OpenBLAS's threaded jobs run on numba's OpenMP threads: one pool of threads per process.

Left alone, a process running netbrew has two pools. OpenBLAS's worker threads run each
threaded GEMM and then busy-wait for a while (2^28 cycles, some 75 ms here) for the next
one; numba's OpenMP threads run the parallel kernels (epilogues, pools, depthwise convs)
and sleep at once (OMP_WAIT_POLICY=PASSIVE, set by netbrew.jit), because OpenMP threads
left spinning took the cores OpenBLAS's threads needed. So every parallel numba kernel
wakes a sleeping thread (35-45 us on this 2-core VM, against 1.6 us for a spinning one),
and it competes for the core with OpenBLAS's spinning worker. The kernels' parallel
thresholds had to be high, and most ran on one core.

OpenBLAS 0.3.27 and later let the caller run its parallel jobs
(openblas_set_threads_callback_function): `install` hands it `_callback`, a numba cfunc
that runs the jobs of each threaded BLAS call as one `prange` over numba's OpenMP team.
OpenBLAS's own workers then never run again, OpenMP's threads spin briefly after each
region (netbrew.jit sets GOMP_SPINCOUNT=10000 and leaves OMP_WAIT_POLICY unset when this
pool is on), and a parallel numba kernel right after a GEMM starts in microseconds, so
`jit.Kernel.pick` lowers its thresholds (PICK_SCALE). The jobs of one call wait on each
other (OpenBLAS's level-3 driver shares packed panels between them), so they must all run
at once: OpenBLAS's thread count is capped at numba's.

Measured (2-core Zen 4 VM, OpenBLAS 0.3.31, alternating processes, Predictor medians):
shufflenet 5.2-5.5 ms against 5.9-6.6, mobilenetv2 7.8-8.0 against 8.5-8.8, resnet50 53-54
against 53.7-54.5.

Installed where netbrew.jit is enabled, OpenBLAS (pthreads build) is the BLAS NumPy
loaded, it has the callback, and numba's threading layer is OpenMP or TBB (the workqueue
layer cannot take launches from two threads at once, as a `dag` net's workers make).
NETBREW_BLAS_POOL=0 keeps OpenBLAS's own threads. A forked child goes back to them (GNU
OpenMP cannot be used in a child forked after its team ran).
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np  # noqa: F401  (loads the BLAS that threadpoolctl then finds)

_lock = threading.Lock()
_state: dict = {"libs": None, "installed": [], "fork_hook": False}


def wanted() -> bool:
    """Whether the environment allows the pool (NETBREW_BLAS_POOL is not 0)."""
    return os.environ.get("NETBREW_BLAS_POOL", "1") != "0"


def _openblas() -> list:
    """(threadpoolctl controller, set-callback function) for each pthreads OpenBLAS loaded
    with NumPy that has the callback (looked up once)."""
    if _state["libs"] is None:
        found = []
        try:
            from threadpoolctl import ThreadpoolController

            controllers = ThreadpoolController().lib_controllers
        except Exception:  # noqa: BLE001  (no threadpoolctl, or it failed: no pool)
            controllers = []
        for c in controllers:
            if c.internal_api != "openblas" or getattr(c, "threading_layer", "") != "pthreads":
                continue
            setter = c._get_symbol("openblas_set_threads_callback_function")
            if setter is not None:
                setter.argtypes = [ctypes.c_void_p]
                setter.restype = None
                found.append((c, setter))
        _state["libs"] = found
    return _state["libs"]


def supported() -> bool:
    """Whether an OpenBLAS that can take the callback is loaded (numba not checked)."""
    return bool(_openblas())


def installed() -> bool:
    """Whether OpenBLAS's threaded calls run on numba's OpenMP threads now."""
    return bool(_state["installed"])


def install() -> bool:
    """Hands OpenBLAS's parallel jobs to numba's OpenMP threads; True where that is now
    so. Caps OpenBLAS's thread count at numba's. A no-op where it is already installed
    or not possible (see the module's docstring)."""
    with _lock:
        if _state["installed"]:
            return True
        libs = _openblas()
        if not libs or not wanted():
            return False
        try:
            import numba

            from netbrew import blas_jobs

            layer, callback = blas_jobs.start()
            if layer not in ("omp", "tbb"):
                return False
            address = callback.address
            _state["callback"] = callback  # kept alive while OpenBLAS holds its address
            _state["sgemm"] = _sgemm_address(libs[0][0])
        except Exception:  # noqa: BLE001  (numba missing or broken: OpenBLAS keeps its own)
            return False
        most = numba.config.NUMBA_NUM_THREADS
        for controller, setter in libs:
            if controller.get_num_threads() > most:
                controller.set_num_threads(most)
            setter(address)
            _state["installed"].append(setter)
        if not _state["fork_hook"] and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_reset_in_child)
            _state["fork_hook"] = True
        return True


def uninstall() -> None:
    """Gives OpenBLAS its own threads back."""
    with _lock:
        for setter in _state["installed"]:
            setter(None)
        _state["installed"] = []
        _state["sgemm"] = None


def _sgemm_address(controller) -> int | None:
    """The address of cblas_sgemm in an ILP64 OpenBLAS (NumPy's own, whose symbols end in
    64_), else None (blas_jobs calls it with 64-bit dimensions)."""
    prefix, suffix = controller._find_affixes() or ("", "")
    if "64" not in suffix:
        return None
    fn = getattr(controller.dynlib, f"{prefix}cblas_sgemm{suffix}", None)
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def max_threads() -> int | None:
    """The most threads OpenBLAS may use while the pool is installed (numba's count), else
    None."""
    if not installed():
        return None
    import numba

    return numba.config.NUMBA_NUM_THREADS


SMALL_GEMM = 1_000_000
"""M * N * K up to which OpenBLAS runs a GEMM on one thread, whatever its thread count (its
small-matrix kernels); a batch of such GEMMs gains from spreading its items over the cores."""
BATCH_MIN_WORK = 1 << 23
"""Multiply-adds a batch of small GEMMs must have, in all, to be spread (about 0.1 ms of one
core's work: a parallel region and two calls into BLAS cost a few microseconds)."""


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """out = a @ b for stacks a (B, M, K), b (B, K, N), out (B, M, N) of C-contiguous
    float32, the B products spread over numba's threads, one single-threaded SGEMM each,
    where that pays: True if done, False (nothing written) where the caller should call
    np.matmul. Pays where the pool is installed (numba's threads are awake) and each product
    is small enough that OpenBLAS would run it on one thread anyway (SMALL_GEMM), as the
    Winograd convs' p^2 products of ResNet-50's 56x56 and 28x28 images are (36 of
    196 x 64 x 64 and 49 x 128 x 128): op by op, 1.5-1.6x the speed of np.matmul's loop of
    one-thread calls. OpenBLAS is held at one thread meanwhile (batch_split's refcount), so
    no item can start a threaded call inside the parallel region."""
    sgemm = _state.get("sgemm")
    if not sgemm or a.ndim != 3 or a.shape[0] < 2:
        return False
    items, m, k = a.shape
    n = b.shape[-1]
    if m * n * k > SMALL_GEMM or items * m * n * k < BATCH_MIN_WORK:
        return False
    if (
        not all(
            x.dtype == np.float32 and x.flags.c_contiguous and x.shape[0] == items
            for x in (a, b, out)
        )
        or b.shape[1] != k
        or out.shape[1:] != (m, n)
    ):
        return False
    from netbrew import blas_jobs
    from netbrew.operators import batch_split

    with batch_split.one_blas_thread():
        blas_jobs.gemm_items(sgemm, a, b, out)
    return True


def _reset_in_child() -> None:
    for setter in _state["installed"]:
        setter(None)
    _state["installed"] = []
    _state["sgemm"] = None
