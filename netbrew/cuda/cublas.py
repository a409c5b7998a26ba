"""cuBLAS through ctypes: row-major GEMMs on device pointers, one handle per device.

The library is looked for, in order, in the NVIDIA wheels (nvidia-cublas-cu12's
nvidia/cublas/lib, CUDA 13's nvidia-cublas in nvidia/cu13/lib), then where the system's
linker finds "cublas" (ctypes.util.find_library), then in the CUDA toolkit ($CUDA_HOME,
$CUDA_PATH, $CUDA_ROOT, /usr/local/cuda: lib64 and targets/*/lib), then by name
(libcublas.so.12, libcublas.so.13, libcublas.so). Nothing is loaded before a GEMM first
runs on a GPU.
When none loads, `load` raises DeviceError naming what to install, and the GEMM callers
(netbrew.operators.cuda.gemm) use their own tiled kernel instead.

cuBLAS is column major; a row-major C = op(A) op(B) is the column-major Cᵀ = op(B)ᵀ op(A)ᵀ,
so `gemm` passes B first and swaps the dims, with no copy. All calls run on the default
stream, as PyCUDA's launches do, so they are ordered with the kernels around them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading
from typing import Any

import numpy as np

from netbrew.cuda import DeviceError

INSTALL = (
    "pip install nvidia-cublas-cu12 (CUDA 12 drivers) or nvidia-cublas (CUDA 13), or install "
    "the CUDA toolkit's libcublas where the dynamic linker finds it"
)
NAMES = ("libcublas.so.12", "libcublas.so.13", "libcublas.so")
WHEEL_DIRS = (("nvidia.cublas", "lib"), ("nvidia.cu13", "lib"))  # (package, its lib folder)

OP_N, OP_T = 0, 1
CUDA_R_32F, CUDA_R_16F = 0, 2
COMPUTE_32F = 68
GEMM_DEFAULT = -1

_lock = threading.Lock()
_lib: Any = None
_error: str | None = None  # why loading failed, once it has
_handles: dict[int, ctypes.c_void_p] = {}

# indirections the tests replace
_find_spec = importlib.util.find_spec
_find_library = ctypes.util.find_library
_cdll = ctypes.CDLL


def _wheel_paths() -> list[str]:
    """libcublas.so.* inside the installed NVIDIA wheels, the shortest (the soname) first."""
    found: list[str] = []
    for package, sub in WHEEL_DIRS:
        try:
            spec = _find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec else []:
            paths = glob.glob(os.path.join(root, sub, "libcublas.so.*"))
            found += sorted(paths, key=lambda p: (len(p), p))
    return found


def toolkit_roots() -> list[str]:
    """CUDA toolkit folders: those the environment names, then /usr/local/cuda."""
    names = ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")
    return [r for r in (*(os.environ.get(n) for n in names), "/usr/local/cuda") if r]


def _toolkit_paths() -> list[str]:
    found: list[str] = []
    for root in toolkit_roots():
        for sub in ("lib64", os.path.join("targets", "*", "lib")):
            paths = glob.glob(os.path.join(root, sub, "libcublas.so.*"))
            found += sorted(paths, key=lambda p: (len(p), p))
    return found


def candidates() -> list[str]:
    """Where `load` looks, in order: wheel files, the linker's find, the CUDA toolkit's
    folders, then bare names."""
    order = _wheel_paths()
    system = _find_library("cublas")
    if system:
        order.append(system)
    order += _toolkit_paths()
    order += NAMES
    return list(dict.fromkeys(order))  # first occurrence wins


def load() -> Any:
    """The loaded cuBLAS (a ctypes.CDLL with its prototypes set); DeviceError if none loads.
    The outcome is kept: a missing library is looked for once per process (see `reset`)."""
    global _lib, _error
    with _lock:
        if _lib is not None:
            return _lib
        if _error is None:
            tried = []
            for path in candidates():
                try:
                    lib = _cdll(path)
                    _prototypes(lib)
                except (OSError, AttributeError) as e:
                    tried.append(f"{path} ({e})")
                    continue
                _lib = lib
                return lib
            _error = "cuBLAS could not be loaded; tried " + "; ".join(tried)
        raise DeviceError(f"{_error}. {INSTALL}")


def available() -> bool:
    """Whether cuBLAS loads (without creating a handle)."""
    try:
        load()
    except DeviceError:
        return False
    return True


def reset() -> None:
    """Forgets the loaded library, a failed search and the handles (for tests)."""
    global _lib, _error
    with _lock:
        _lib, _error = None, None
        _handles.clear()


def _prototypes(lib: Any) -> None:
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    sigs = {
        "cublasCreate_v2": [ctypes.POINTER(p)],
        "cublasSgemm_v2": [p, i, i, i, i, i, p, p, i, p, i, p, p, i],
        "cublasSgemmStridedBatched": [p, i, i, i, i, i, p, p, i, ll, p, i, ll, p, p, i, ll, i],
        "cublasGemmEx": [p, i, i, i, i, i, p, p, i, i, p, i, i, p, p, i, i, i, i],
        "cublasGemmStridedBatchedEx": [
            p,
            i,
            i,
            i,
            i,
            i,
            p,
            p,
            i,
            i,
            ll,
            p,
            i,
            i,
            ll,
            p,
            p,
            i,
            i,
            ll,
            i,
            i,
            i,
        ],  # fmt: skip
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int


def handle(device: int) -> ctypes.c_void_p:
    """This device's cuBLAS handle, created on first use in its (current) context."""
    lib = load()
    with _lock:
        h = _handles.get(device)
        if h is None:
            h = ctypes.c_void_p()
            _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
            _handles[device] = h
    return h


STATUS = {
    1: "NOT_INITIALIZED (is the driver too old for this cuBLAS?)",
    3: "ALLOC_FAILED",
    7: "INVALID_VALUE",
    8: "ARCH_MISMATCH",
    11: "MAPPING_ERROR",
    13: "EXECUTION_FAILED",
    14: "INTERNAL_ERROR",
    15: "NOT_SUPPORTED",
}


def _check(status: int, what: str) -> None:
    if status:
        raise DeviceError(f"{what} failed: CUBLAS_STATUS_{STATUS.get(status, status)}")


def gemm(
    device: int,
    dtype: Any,
    trans_a: bool,
    trans_b: bool,
    m: int,
    n: int,
    k: int,
    alpha: float,
    a: int,
    lda: int,
    stride_a: int,
    b: int,
    ldb: int,
    stride_b: int,
    beta: float,
    c: int,
    ldc: int,
    stride_c: int,
    batch: int = 1,
) -> None:
    """Row major, for z < batch: C[z] (m, n) = alpha * op(A[z]) op(B[z]) + beta * C[z].

    a, b, c are device addresses; lda, ldb, ldc the stored row lengths and the strides the
    distances between batch items, all in elements. float32 runs cublasSgemm (strided
    batched when batch > 1), float16 cublasGemmEx with float32 accumulation.
    """
    lib = load()
    h = handle(device)
    ta, tb = (OP_T if t else OP_N for t in (trans_a, trans_b))
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    # column major: Cᵀ (n, m) = op(B)ᵀ (n, k) · op(A)ᵀ (k, m)
    dims = (tb, ta, n, m, k, ctypes.byref(al))
    if np.dtype(dtype) == np.float32:
        if batch == 1:
            status = lib.cublasSgemm_v2(h, *dims, b, ldb, a, lda, ctypes.byref(be), c, ldc)
        else:
            status = lib.cublasSgemmStridedBatched(
                h, *dims, b, ldb, stride_b, a, lda, stride_a, ctypes.byref(be), c, ldc,
                stride_c, batch,
            )  # fmt: skip
        what = "cublasSgemm"
    elif np.dtype(dtype) == np.float16:
        f16 = CUDA_R_16F
        if batch == 1:
            status = lib.cublasGemmEx(
                h, *dims, b, f16, ldb, a, f16, lda, ctypes.byref(be), c, f16, ldc, COMPUTE_32F,
                GEMM_DEFAULT,
            )  # fmt: skip
        else:
            status = lib.cublasGemmStridedBatchedEx(
                h, *dims, b, f16, ldb, stride_b, a, f16, lda, stride_a, ctypes.byref(be), c,
                f16, ldc, stride_c, batch, COMPUTE_32F, GEMM_DEFAULT,
            )  # fmt: skip
        what = "cublasGemmEx"
    else:
        raise TypeError(f"cuBLAS GEMM: no kernel for dtype {np.dtype(dtype)}")
    _check(status, what)
