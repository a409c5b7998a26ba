"""Launch helpers the CUDA kernels share: grids, GPU allocation, broadcast metadata.

Kernels follow the CPU kernels' signature on GPUArrays: `(*arrays, **attrs) -> tuple`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.cuda import activate, allocator, current_device, to_gpu
from netbrew.cuda.compile import function

BLOCK = 256
MAX_RANK = 8
MAX_GRID = 65535 * 4


def grid(n: int, block: int = BLOCK) -> dict[str, tuple]:
    """Launch shape for a grid-stride loop over n elements (at least one block)."""
    blocks = max(1, min((n + block - 1) // block, MAX_GRID))
    return {"grid": (blocks, 1, 1), "block": (block, 1, 1)}


def empty(shape: Sequence[int], dtype: Any) -> Any:
    """An uninitialised GPUArray from the current device's memory pool."""
    import pycuda.gpuarray as gpuarray

    return gpuarray.empty(tuple(int(d) for d in shape), np.dtype(dtype), allocator=allocator())


def zeros(shape: Sequence[int], dtype: Any) -> Any:
    """A zero-filled GPUArray of any dtype: a byte memset, since pycuda's fill kernel has
    no float16 (empty shapes allocate nothing)."""
    import pycuda.driver as drv

    out = empty(shape, dtype)
    if out.nbytes:
        drv.memset_d8(out.gpudata, 0, out.nbytes)
    return out


def broadcast_meta(out_shape: Sequence[int], *in_shapes: Sequence[int]) -> Any:
    """A GPU int64 array [shape (MAX_RANK), strides of input 0 (MAX_RANK), ...] for
    nb_broadcast_offset; strides are in elements, 0 on broadcast axes (NumPy's rules)."""
    rank = len(out_shape)
    if rank > MAX_RANK:
        raise ValueError(f"rank {rank} is over the CUDA kernels' limit of {MAX_RANK}")
    rows = [list(out_shape) + [1] * (MAX_RANK - rank)]
    for shape in in_shapes:
        padded = [1] * (rank - len(shape)) + list(shape)
        strides, step = [0] * rank, 1
        for d in reversed(range(rank)):
            strides[d] = 0 if padded[d] == 1 and out_shape[d] != 1 else step
            step *= padded[d]
        rows.append(strides + [0] * (MAX_RANK - rank))
    return constant(np.array(rows, np.int64).reshape(-1))


CONSTANTS = 4096  # metadata arrays kept per process
CONSTANT_BYTES = 4096  # the largest array kept
_constants: OrderedDict[tuple, Any] = OrderedDict()
_constants_lock = threading.Lock()


def constant(values: Any, dtype: Any = np.int64) -> Any:
    """A small read-only host array (kernel metadata: shapes, strides, windows) on the
    current device, uploaded once per device and content and then reused.

    An upload from pageable memory first waits for every kernel queued before it, so one
    per launch made the CPU wait for the GPU at almost every op. Kernels must not write to
    what this returns."""
    array = np.ascontiguousarray(values, dtype)
    if array.nbytes > CONSTANT_BYTES:
        return to_gpu(array, device=None)
    key = (current_device(), array.dtype.str, array.shape, array.tobytes())
    with _constants_lock:
        found = _constants.get(key)
        if found is not None:
            _constants.move_to_end(key)
            return found
    found = to_gpu(array, device=None)
    with _constants_lock:
        _constants[key] = found
        if len(_constants) > CONSTANTS:
            _constants.popitem(last=False)
    return found


def kernel(family: str, name: str, device: int | None = None):
    """The compiled kernel of the current device (or `device`): see
    netbrew.cuda.compile.function. Launch it with GPUArrays as arguments (pycuda passes
    their pointers; `x.gpudata` is None for an empty array and an int for a view) and
    skip the launch when there is no element."""
    device = current_device() if device is None else device
    activate(device)
    return function(family, name, device)


CTYPES = {
    np.dtype(t): tag
    for t, tag in [(np.float32, "f32"), (np.float16, "f16"), (np.float64, "f64"),
                   (np.int32, "i32"), (np.int64, "i64"), (np.bool_, "b8")]
}  # fmt: skip


def suffix(dtype: Any, op: str, allowed: Sequence[str] = ("f32", "f16")) -> str:
    """The kernel-name suffix of `dtype` ('f32'...), or a TypeError naming the op."""
    tag = CTYPES.get(np.dtype(dtype))
    if tag not in allowed:
        raise TypeError(f"{op}: no CUDA kernel for dtype {np.dtype(dtype)} (have {list(allowed)})")
    return tag
