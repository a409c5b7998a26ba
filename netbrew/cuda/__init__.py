"""The GPU runtime over PyCUDA (the `[cuda]` extra): availability, contexts, GPU blobs.

PyCUDA is imported the first time CUDA is asked for, never by a CPU-only run. Whenever
CUDA is asked for and cannot be had, DeviceError says which part is missing: pycuda, the
CUDA driver, or a device with that id.

    from netbrew import cuda
    cuda.is_available(), cuda.device_count(), cuda.device_name(0)
    x_gpu = cuda.to_gpu(x, device=0)       # a pycuda GPUArray
    cuda.to_host(x_gpu)                    # back to NumPy
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

import numpy as np

from netbrew.errors import NetbrewError

_INSTALL = 'pip install "netbrew[cuda]" (PyCUDA; it builds against the CUDA toolkit)'


class DeviceError(NetbrewError, RuntimeError):
    """CUDA was asked for and cannot be had; the message names the missing part."""


_lock = threading.Lock()
_contexts: dict[int, Any] = {}
_pools: dict[int, Any] = {}  # device -> pycuda DeviceMemoryPool
_thread = threading.local()  # .device: the device whose context is current here
_init_error: str | None = None


def _driver():
    """pycuda.driver, initialised once; DeviceError when pycuda or the driver is missing."""
    global _init_error
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise DeviceError(f"CUDA needs pycuda, which is not installed ({e}): {_INSTALL}") from None
    with _lock:
        if _init_error is None:
            try:
                drv.init()
            except Exception as e:  # pycuda.driver.Error: no driver, no device
                _init_error = f"the CUDA driver could not start ({e})"
            else:
                _init_error = ""
    if _init_error:
        raise DeviceError(f"{_init_error}; is an NVIDIA driver installed and a GPU visible?")
    return drv


def is_available() -> bool:
    """True when pycuda imports, the driver starts and at least one GPU is visible."""
    try:
        return _driver().Device.count() > 0
    except DeviceError:
        return False


def device_count() -> int:
    """How many GPUs the driver sees (0 without pycuda or a driver)."""
    try:
        return _driver().Device.count()
    except DeviceError:
        return 0


def _check_id(device: int) -> Any:
    drv = _driver()
    count = drv.Device.count()
    if not 0 <= device < count:
        raise DeviceError(
            f"no CUDA device {device}: the driver sees {count} device(s)"
            + (f" (0..{count - 1})" if count else "")
        )
    return drv


def require(device: int | str | None = 0) -> int:
    """The ordinal of `device` when it can be used; else DeviceError naming what is
    missing (pycuda, the driver, or a device with that id)."""
    index = parse_device(device)
    _check_id(index)
    return index


def device_name(device: int = 0) -> str:
    return _check_id(device).Device(device).name()


def parse_device(device: str | int | None) -> int:
    """The ordinal of 'cuda', 'cuda:N', 'gpu:N' or N (None is 0)."""
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    kind, _, index = str(device).lower().partition(":")
    if kind not in ("cuda", "gpu") or (index and not index.isdigit()):
        raise ValueError(f"device {device!r}: expected 'cuda', 'cuda:N' or an int")
    return int(index or 0)


def activate(device: int = 0) -> Any:
    """Makes device `device`'s primary context current on this thread; returns it.

    Every thread that launches kernels calls this (the dag runtime's workers too)."""
    if getattr(_thread, "device", None) == device:
        return _contexts[device]
    drv = _check_id(device)
    with _lock:
        ctx = _contexts.get(device)
        if ctx is None:
            ctx = _contexts[device] = drv.Device(device).retain_primary_context()
            if len(_contexts) == 1:
                atexit.register(_release_at_exit)
    if getattr(_thread, "device", None) is not None:
        drv.Context.pop()
    ctx.push()  # it stays current on this thread until another device is activated
    _thread.device = device
    return ctx


def _release_at_exit() -> None:
    """Pops the main thread's context at exit: pycuda's module cleanup, which runs after
    this, aborts the process when it finds a context still on the stack."""
    for pool in _pools.values():
        pool.stop_holding()  # its blocks are freed as their arrays go
    if getattr(_thread, "device", None) is not None:
        _driver().Context.pop()
        _thread.device = None


def synchronize(device: int = 0) -> None:
    """Waits for every kernel launched on `device` to finish."""
    activate(device)
    _driver().Context.synchronize()


def is_gpu_array(value: Any) -> bool:
    """True for a pycuda GPUArray (checked without importing pycuda)."""
    return hasattr(value, "gpudata") and hasattr(value, "get")


def to_gpu(value: Any, device: int | str | None = 0) -> Any:
    """`value` as a GPUArray on `device` (a GPUArray is returned as it is); device=None
    means the device whose context is current on this thread (0 if none is)."""
    if is_gpu_array(value):
        return value
    activate(current_device() if device is None else parse_device(device))
    import pycuda.gpuarray as gpuarray

    array = np.asarray(value, order="C")  # (ascontiguousarray makes 0-d 1-d)
    return gpuarray.to_gpu(array, allocator=allocator())


def allocator(device: int | None = None) -> Any:
    """The `allocate` of `device`'s memory pool (the current device's by default).

    Every GPU blob comes from it: a freed block is kept for the next array of its size
    class, as Caffe2's CUB allocator did, since cuMemFree waits for the whole device and
    cuMemAlloc costs tens of microseconds. The pool keeps its blocks until exit."""
    return memory_pool(device).allocate


def memory_pool(device: int | None = None) -> Any:
    """`device`'s pycuda DeviceMemoryPool (see `allocator`): its `managed_bytes` is what
    netbrew holds on the device, `active_bytes` what live arrays use, and `free_held()`
    gives the kept blocks back to the driver."""
    index = current_device() if device is None else device
    pool = _pools.get(index)
    if pool is None:
        activate(index)
        from pycuda.tools import DeviceMemoryPool

        with _lock:
            pool = _pools.setdefault(index, DeviceMemoryPool())
    return pool


def current_device() -> int:
    """The device whose context is current on this thread (0 when none is yet)."""
    return getattr(_thread, "device", None) or 0


def to_host(value: Any) -> Any:
    """A GPUArray copied back to NumPy; anything else as it is."""
    return value.get() if is_gpu_array(value) else value


def blob_device(value: Any) -> str:
    """'cuda' for a GPUArray, 'cpu' for anything else (for printing and errors)."""
    return "cuda" if is_gpu_array(value) else "cpu"
