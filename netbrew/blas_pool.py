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
(openblas_set_threads_callback_function): `install` hands it a numba cfunc
(netbrew.blas_jobs) that runs the jobs of each threaded BLAS call as one `prange` over
numba's OpenMP team.
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
loaded, it has the callback, and numba's threading layer is OpenMP without OMP_DYNAMIC: an
OpenMP team runs each of its threads' iterations at once, which the jobs need. (numba's
workqueue layer cannot take launches from two threads at once, as a `dag` net's workers
make; TBB may run two iterations one after the other on one thread; a dynamic OpenMP team
may have fewer threads than jobs.) NETBREW_BLAS_POOL=0 keeps OpenBLAS's own threads, and
so does a forked child (GNU OpenMP cannot be used in a child forked after its team ran).

`install` and netbrew's `set_num_threads` keep OpenBLAS's thread count within numba's. A
count raised past it through threadpoolctl directly still runs: the cfunc asks OpenMP for a
team of the job count, which may be more threads than numba's (and than the cores).

With numba's threads awake between kernels, `batched_matmul` spreads a stack of GEMMs over
them, a product a thread (the Winograd convs' p^2 products).
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

_lock = threading.Lock()
_state: dict = {"libs": None, "installed": [], "callback": None, "sgemm": None, "fork_hook": False}


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
            if layer != "omp" or os.environ.get("OMP_DYNAMIC", "").lower() in ("1", "true"):
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
        _clear()


def _clear() -> None:
    """Every OpenBLAS back on its own threads, and nothing left to call through."""
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


BATCH_MIN_WORK = 1 << 23
"""Multiply-adds a stack of GEMMs must have, in all, to be spread over the threads (about
0.1 ms of one core's work: a parallel region and the calls into BLAS cost a few
microseconds)."""


def batched_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """out = a @ b (np.matmul's batch broadcasting) for float32 stacks of matrices, the
    products spread over numba's threads, one single-threaded SGEMM each, where that pays:
    True if done, False (nothing written) where the caller should call np.matmul.

    It takes any layout BLAS can read in place: each matrix's rows or columns contiguous,
    and the batch dims of each array collapsing to one stride; the output row-major per
    matrix. It pays where the pool is installed (numba's threads awake) and the stack has
    two products or more and BATCH_MIN_WORK multiply-adds: OpenBLAS runs a product of up
    to 1e6 multiply-adds on one thread whatever its thread count, and splits a bigger one
    into two halves that sync at every panel; whole products a thread lose neither.
    Measured after a threaded GEMM, 2-core VM: Winograd's 36 x 196x64x64 555 -> 322 us and
    36 x 49x128x128 657 -> 310 us, attention's 12 x 128x64x128 261 -> 144 us, a grouped 1x1
    conv's 3 x 196x80x80 273 -> 139 us, 16 x 196x128x128 926 -> 732 us, 2 x 784x256x256
    1239 -> 1201 us. OpenBLAS is held at one thread meanwhile (batch_split's refcount), so
    no product starts a threaded call inside the parallel region.

    In the models, only the Winograd convs gain (in-process A/B with it off: resnet50
    0.975x, squeezenet 0.986x); MatMul's attention products (bert_layer), shufflenet's and
    mobilenetv2's grouped convs measured within 1% either way, so they call np.matmul."""
    from netbrew.operators import batch_split

    sgemm = _state["sgemm"]
    if not sgemm or a.ndim < 2 or b.ndim < 2 or out.ndim < 3:
        return False
    if batch_split.inside():  # a part of a split batch: the other cores run the other parts
        return False
    if not (a.dtype == b.dtype == out.dtype == np.float32):
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return False
    items = int(np.prod(batch))
    if items < 2 or items * m * n * k < BATCH_MIN_WORK or b.shape[-2] != k:
        return False
    if out.shape != (*batch, m, n):
        return False
    sa, sb, sc = (_batch_stride(x, batch) for x in (a, b, out))
    la, lb, lc = _blas_layout(a), _blas_layout(b), _blas_layout(out)
    if None in (sa, sb, sc, la, lb, lc) or lc[0] != NO_TRANS or not sc:
        return False
    if np.may_share_memory(out, a) or np.may_share_memory(out, b):
        return False
    from netbrew import blas_jobs  # needs numba, which an installed pool implies

    with batch_split.one_blas_thread():
        blas_jobs.gemm_items(
            sgemm, la[0], lb[0], m, n, k,
            a.ctypes.data, sa, la[1], b.ctypes.data, sb, lb[1], out.ctypes.data, sc, lc[1],
            items,
        )  # fmt: skip
    return True


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """np.matmul(a, b, out=out), through `batched_matmul` where that takes it."""
    if not batched_matmul(a, b, out):
        np.matmul(a, b, out=out)
    return out


NO_TRANS, TRANS = 111, 112
"""CBLAS's CblasNoTrans and CblasTrans."""


def _blas_layout(x: np.ndarray) -> tuple[int, int] | None:
    """(NO_TRANS, row stride) where x's matrices (its last two dims) have contiguous rows,
    (TRANS, column stride) where they have contiguous columns, in elements; else None."""
    rows, cols = x.shape[-2:]
    s_r, s_c = (s // x.itemsize for s in x.strides[-2:])
    if any(s % x.itemsize for s in x.strides[-2:]):
        return None
    if (s_c == 1 or cols == 1) and s_r >= max(cols, 1):
        return NO_TRANS, s_r
    if (s_r == 1 or rows == 1) and s_c >= max(rows, 1):
        return TRANS, s_c
    return None


def _batch_stride(x: np.ndarray, batch: tuple[int, ...]) -> int | None:
    """The one byte stride between x's consecutive matrices over the broadcast batch
    dims (0 where x has no batch of its own), or None where its batch dims do not collapse
    into one."""
    full = np.broadcast_to(x, (*batch, *x.shape[-2:]))
    dims = [(size, stride) for size, stride in zip(full.shape[:-2], full.strides[:-2]) if size > 1]
    for (_, outer), (size, inner) in zip(dims, dims[1:]):
        if outer != inner * size:
            return None
    return dims[-1][1] if dims else 0


def _reset_in_child() -> None:
    _clear()  # without the lock: a fork may have copied it held
