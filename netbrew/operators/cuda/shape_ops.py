"""CUDA kernels of data movement (shape_ops.cu), checked against the NumPy kernels.

- Reshape, Flatten, Squeeze and Unsqueeze return a view of their input (a copy first when
  it is not C-contiguous), as the NumPy kernels return views; Identity, StopGradient and
  Alias return the input itself; Copy and EnsureCPUOutput return a copy on the GPU.
- Transpose, Slice, Expand, Tile, Concat, Split, SliceGradient and SplitGradient are one
  strided copy each (per input): a kernel per element size (1, 2, 4, 8 or 16 bytes, so any
  dtype), its layout (shape, source and destination strides in elements) coalesced on the
  host and passed by value; 32-bit index math when every offset fits.
- TileGradient sums the repeats per output element (float32/16/64, no atomics).
- Shape and Size compute their few int64 values from the GPUArray's shape and upload them.

Small integer inputs (shape, axes, starts/ends/steps, split, repeats) may arrive as
GPUArrays: they are read back with to_host and resolved by the CPU kernels' own helpers, so
errors and edge cases match. Shapes-only arguments are passed to those helpers as
zero-strided NumPy stand-ins (`meta`) of the GPU array, without copying it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.cuda import to_gpu, to_host
from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.concat_split import split_sizes
from netbrew.operators.cuda.launch import empty, grid, kernel, suffix, zeros
from netbrew.operators.expand_tile import _int_vector, _repeats
from netbrew.operators.indexing import slice_index
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel as register
from netbrew.operators.shape import int_list, normalize_axes, reshape_dims

FAMILY = "shape_ops"
COPY_RANK = 16  # NB_COPY_RANK in shape_ops.cu
_INT32_MAX = 2**31 - 1
_ITEMSIZES = (1, 2, 4, 8, 16)

# -- helpers shared by the family (gather.py uses them too) ------------------------------


def device() -> int:
    """The CUDA ordinal whose context the executor made current on this thread (0 if none)."""
    from netbrew import cuda

    return getattr(cuda._thread, "device", None) or 0


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of `shape`, in elements."""
    strides, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(strides)


def strides_of(a: Any) -> tuple[int, ...]:
    """A GPUArray's strides in elements (row-major ones for an empty array)."""
    if a.size == 0:
        return c_strides(a.shape)
    return tuple(int(s) // a.dtype.itemsize for s in a.strides)


def is_contiguous(a: Any) -> bool:
    """Whether `a` is C-contiguous (size-1 dims may have any stride)."""
    if a.size <= 1:
        return True
    return all(d == 1 or s == c for d, s, c in zip(a.shape, strides_of(a), c_strides(a.shape)))


def meta(a: Any) -> np.ndarray:
    """A zero-strided NumPy stand-in with `a`'s shape and dtype (no copy), for the CPU
    helpers that read only shapes."""
    return np.broadcast_to(np.zeros((), a.dtype), tuple(a.shape))


def host(a: Any) -> np.ndarray | None:
    """A small integer input as NumPy (None stays None)."""
    return None if a is None else np.asarray(to_host(a))


def upload(values: Any) -> Any:
    """`values` as a GPUArray of the same shape on the current device (0-d stays 0-d)."""
    values = np.asarray(values)
    out = to_gpu(values, device=None)
    return out if tuple(out.shape) == values.shape else view(out, values.shape)


def view(a: Any, shape: Sequence[int]) -> Any:
    """`a`'s data under another shape of the same size, sharing its memory (a contiguous
    copy first when `a` is not C-contiguous)."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != a.size:
        raise ShapeError(f"cannot view {a.size} elements as shape {list(shape)}")
    if a.size == 0:  # pycuda keeps no pointer for an empty array
        return empty(shape, a.dtype)
    if not is_contiguous(a):
        a = copy_array(a)
    import pycuda.gpuarray as gpuarray

    # gpudata stays the allocation object itself (pycuda's own views hold a bare int, which
    # kernels launched with `x.gpudata`, as activations.py does, cannot take)
    return gpuarray.GPUArray(shape, a.dtype, allocator=a.allocator, base=a, gpudata=a.gpudata)


def _coalesce(shape, src, dst) -> list[tuple[int, int, int]]:
    """(size, src stride, dst stride) per dim, without size-1 dims, neighbours merged
    where both layouts walk them as one."""
    dims: list[tuple[int, int, int]] = []
    for d, s, t in zip(shape, src, dst):
        if d == 1:
            continue
        if dims and dims[-1][1] == s * d and dims[-1][2] == t * d:
            dims[-1] = (dims[-1][0] * d, s, t)
        else:
            dims.append((int(d), int(s), int(t)))
    return dims or [(1, 0, 0)]


def _fits_int32(n: int, offsets: Sequence[int], extents: Sequence[int]) -> bool:
    return n <= _INT32_MAX and all(abs(o) + e <= _INT32_MAX for o, e in zip(offsets, extents))


def copy_into(
    dst: Any,
    src: Any,
    shape: Sequence[int],
    src_strides: Sequence[int],
    dst_strides: Sequence[int],
    *,
    src_offset: int = 0,
    dst_offset: int = 0,
    op: str,
) -> None:
    """dst[dst_offset + c . dst_strides] = src[src_offset + c . src_strides] for every
    coordinate c of `shape` (strides and offsets in elements; src and dst must not overlap)."""
    n = math.prod(int(d) for d in shape)
    if n == 0:
        return
    itemsize = src.dtype.itemsize
    if dst.dtype.itemsize != itemsize or itemsize not in _ITEMSIZES:
        raise TypeError(f"{op}: no CUDA copy from {src.dtype} to {dst.dtype}")
    dims = _coalesce(shape, src_strides, dst_strides)
    if len(dims) > COPY_RANK:
        raise ShapeError(
            f"{op}: the copy needs {len(dims)} dims after merging, over the CUDA kernel's "
            f"limit of {COPY_RANK}"
        )
    layout = np.zeros((3, COPY_RANK), np.int64)
    for k, (d, s, t) in enumerate(dims):
        layout[:, k] = (d, s, t)
    reach = (sum((d - 1) * abs(s) for d, s, _ in dims), sum((d - 1) * abs(t) for d, _, t in dims))
    small = _fits_int32(n, (src_offset, dst_offset), reach)
    fn = kernel(FAMILY, f"copy{'32' if small else ''}_b{itemsize}", device())
    fn(
        layout.reshape(-1),  # NbCopyLayout, by value: shape, src, dst rows
        src,
        dst,
        np.int64(src_offset),
        np.int64(dst_offset),
        np.int64(n),
        np.int64(len(dims)),
        **grid(n),
    )


def copy_array(a: Any, op: str = "Copy") -> Any:
    """A C-contiguous copy of `a` with storage of its own."""
    out = empty(a.shape, a.dtype)
    copy_into(out, a, a.shape, strides_of(a), c_strides(a.shape), op=op)
    return out


def broadcast_strides(
    shape: Sequence[int], strides: Sequence[int], out_shape: Sequence[int], what: str
) -> list[int]:
    """Strides that read an array of `shape` broadcast (NumPy's rules) to `out_shape`."""
    shape, strides = list(shape), list(strides)
    while len(shape) > len(out_shape) and shape[0] == 1:  # leading 1s may be dropped
        shape, strides = shape[1:], strides[1:]
    lead = len(out_shape) - len(shape)
    ok = lead >= 0 and all(d in (1, o) for d, o in zip(shape, out_shape[lead:]))
    if not ok:
        raise ShapeError(f"{what}: shape {shape} does not broadcast to {list(out_shape)}")
    return [0] * lead + [0 if d == 1 else s for d, s in zip(shape, strides)]


def _region(
    shape: Sequence[int], strides: Sequence[int], index: Sequence[slice]
) -> tuple[list[int], list[int], int]:
    """For `index` (one slice per dim) into an array of `shape` and `strides`: the region's
    shape, the strides that walk it and the offset of its first element (in elements)."""
    out, steps, offset = [], [], 0
    for dim, stride, sl in zip(shape, strides, index):
        start, stop, step = sl.indices(int(dim))
        length = len(range(start, stop, step))
        out.append(length)
        steps.append(stride * step)
        offset += start * stride if length else 0
    return out, steps, offset


# -- views and copies --------------------------------------------------------------------


@register("Reshape", device="cuda")
def reshape_cuda(x, shape, allowzero):
    dims = reshape_dims(x.shape, int_list(host(shape), "shape", "Reshape"), allowzero)
    return (view(x, check_numel(dims, "Reshape output shape")),)


@register("Flatten", device="cuda")
def flatten_cuda(x, axis):
    rank = len(x.shape)
    if not -rank <= axis <= rank:
        raise ShapeError(f"Flatten: axis {axis} is out of range [{-rank}, {rank}] for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return (view(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))),)


@register("Squeeze", device="cuda")
def squeeze_cuda(x, axes=None):
    if axes is None:
        return (view(x, [d for d in x.shape if d != 1]),)
    rank = len(x.shape)
    dims = normalize_axes(int_list(host(axes), "axes", "Squeeze"), rank, "Squeeze input 'axes'")
    wrong = [a for a in dims if x.shape[a] != 1]
    if wrong:
        raise ShapeError(
            f"Squeeze: data {list(x.shape)} has size {x.shape[wrong[0]]} on axis {wrong[0]}, "
            "expected 1"
        )
    return (view(x, [d for a, d in enumerate(x.shape) if a not in dims]),)


@register("Unsqueeze", device="cuda")
def unsqueeze_cuda(x, axes):
    requested = int_list(host(axes), "axes", "Unsqueeze")
    rank = len(x.shape) + len(requested)
    dims = set(normalize_axes(requested, rank, "Unsqueeze input 'axes'"))
    rest = iter(x.shape)
    return (view(x, [1 if a in dims else next(rest) for a in range(rank)]),)


def _same(x):
    return (x,)


for _op in ("Identity", "StopGradient", "Alias"):
    register(_op, device="cuda")(_same)


def _copied(x: Any, op: str) -> Any:
    if isinstance(x, list):
        return [_copied(v, op) for v in x]
    return None if x is None else copy_array(x, op)


@register("Copy", device="cuda")
def copy_cuda(x):
    return (_copied(x, "Copy"),)


@register("EnsureCPUOutput", device="cuda")
def ensure_cpu_output_cuda(x):
    """A copy that stays on the GPU: the placement pass records a GPU op's outputs on its
    device and puts a CopyGPUToCPU before any CPU reader."""
    return (_copied(x, "EnsureCPUOutput"),)


# -- permutations, slices, broadcasts ----------------------------------------------------


@register("Transpose", device="cuda")
def transpose_cuda(x, perm):
    rank = len(x.shape)
    if perm is None:
        perm = list(reversed(range(rank)))
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ShapeError(
            f"Transpose: perm {perm} is not a permutation of 0..{rank - 1} for data of rank {rank}"
        )
    shape = [x.shape[p] for p in perm]
    strides = strides_of(x)
    out = empty(shape, x.dtype)
    copy_into(out, x, shape, [strides[p] for p in perm], c_strides(shape), op="Transpose")
    return (out,)


@register("Slice", device="cuda")
def slice_cuda(x, starts, ends, axes=None, steps=None):
    index = slice_index(meta(x), host(starts), host(ends), host(axes), host(steps))
    shape, walk, offset = _region(x.shape, strides_of(x), index)
    out = empty(shape, x.dtype)
    copy_into(out, x, shape, walk, c_strides(shape), src_offset=offset, op="Slice")
    return (out,)


@register("SliceGradient", device="cuda")
def slice_gradient_cuda(dy, x, starts, ends, axes=None, steps=None):
    index = slice_index(
        meta(x), host(starts), host(ends), host(axes), host(steps), op="SliceGradient"
    )
    region, walk, offset = _region(x.shape, c_strides(x.shape), index)
    dx = zeros(x.shape, dy.dtype)
    read = broadcast_strides(dy.shape, strides_of(dy), region, "SliceGradient input dY")
    copy_into(dx, dy, region, read, walk, dst_offset=offset, op="SliceGradient")
    return (dx,)


@register("Expand", device="cuda")
def expand_cuda(x, shape):
    dims = _int_vector(host(shape), "Expand", "shape")
    try:
        out_shape = np.broadcast_shapes(tuple(x.shape), tuple(dims))
    except ValueError:
        raise ShapeError(
            f"Expand: input 'input' of shape {list(x.shape)} does not broadcast with shape "
            f"{dims} (each pair of trailing dims must be equal or one of them 1)"
        ) from None
    check_numel(out_shape, "Expand output")
    read = broadcast_strides(x.shape, strides_of(x), out_shape, "Expand")
    out = empty(out_shape, x.dtype)
    copy_into(out, x, out_shape, read, c_strides(out_shape), op="Expand")
    return (out,)


@register("Tile", device="cuda")
def tile_cuda(x, repeats):
    reps = _repeats(meta(x), host(repeats), "Tile")
    out_shape = check_numel([d * r for d, r in zip(x.shape, reps)], "Tile output")
    out = empty(out_shape, x.dtype)
    # output [r0 * d0, r1 * d1, ...] is [r0, d0, r1, d1, ...] reading x with 0 on each r axis
    split = [n for pair in zip(reps, x.shape) for n in pair]
    read = [s for stride in strides_of(x) for s in (0, stride)]
    copy_into(out, x, split, read, c_strides(split), op="Tile")
    return (out,)


@register("TileGradient", device="cuda")
def tile_gradient_cuda(dy, x, repeats):
    reps = _repeats(meta(x), host(repeats), "TileGradient")
    expected = tuple(d * r for d, r in zip(x.shape, reps))
    if tuple(dy.shape) != expected:
        raise ShapeError(
            f"TileGradient: input 'doutput' has shape {list(dy.shape)}, expected {list(expected)}"
        )
    tag = suffix(dy.dtype, "TileGradient", ("f32", "f16", "f64"))
    dx = empty(x.shape, dy.dtype)
    if dx.size == 0:
        return (dx,)
    if dy.size == 0:  # a repeat of 0: nothing to sum
        return (zeros(x.shape, dy.dtype),)
    if not is_contiguous(dy):
        dy = copy_array(dy, "TileGradient")
    pairs = [
        (d, r, s, d * s) for d, r, s in zip(x.shape, reps, c_strides(expected)) if d != 1 or r != 1
    ] or [(1, 1, 0, 0)]
    if len(pairs) > COPY_RANK:
        raise ShapeError(f"TileGradient: rank {len(pairs)} is over the CUDA limit {COPY_RANK}")
    layout = np.zeros((4, COPY_RANK), np.int64)
    for k, pair in enumerate(pairs):
        layout[:, k] = pair
    n = dx.size
    fn = kernel(FAMILY, f"tile_grad_{tag}", device())
    fn(
        layout.reshape(-1),  # NbTileLayout, by value: dims, reps, dstride, rstride rows
        dy,
        dx,
        np.int64(n),
        np.int64(len(pairs)),
        np.int64(math.prod(reps)),
        **grid(n),
    )
    return (dx,)


# -- joins and splits --------------------------------------------------------------------


@register("Concat", device="cuda")
def concat_cuda(*inputs, axis):
    first = inputs[0]
    rank = len(first.shape)
    if not -rank <= axis < rank:
        raise ShapeError(
            f"Concat: axis {axis} is out of range [{-rank}, {rank - 1}] for rank {rank}"
        )
    axis %= rank
    for i, x in enumerate(inputs[1:], start=1):
        if x.dtype != first.dtype:
            raise SchemaError(f"Concat: input {i} has dtype {x.dtype}, expected {first.dtype}")
        if len(x.shape) != rank or any(
            a != b for d, (a, b) in enumerate(zip(x.shape, first.shape)) if d != axis
        ):
            raise ShapeError(
                f"Concat: input {i} has shape {list(x.shape)}, expected {list(first.shape)} "
                f"in every dim but axis {axis}"
            )
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in inputs)
    out = empty(shape, first.dtype)
    write = c_strides(shape)
    start = 0
    for x in inputs:
        copy_into(
            out, x, x.shape, strides_of(x), write, dst_offset=start * write[axis], op="Concat"
        )
        start += x.shape[axis]
    return (out,)


@register("Split", device="cuda")
def split_cuda(x, split=None, *, axis, num_outputs):
    axis, sizes = split_sizes(meta(x), host(split), axis, num_outputs)
    read = strides_of(x)
    pieces, start = [], 0
    for size in sizes:
        shape = list(x.shape)
        shape[axis] = size
        piece = empty(shape, x.dtype)
        copy_into(
            piece, x, shape, read, c_strides(shape), src_offset=start * read[axis], op="Split"
        )
        pieces.append(piece)
        start += size
    return tuple(pieces)


@register("SplitGradient", device="cuda")
def split_gradient_cuda(x, split, *dys, axis):
    axis, sizes = split_sizes(meta(x), host(split), axis, len(dys), op="SplitGradient")
    present = [d for d in dys if d is not None]
    dtype = present[0].dtype if present else x.dtype
    if any(d.dtype != dtype for d in present):
        raise SchemaError(
            f"SplitGradient: the dY pieces have dtypes {[str(d.dtype) for d in present]}, "
            "expected one dtype"
        )
    dx = (empty if len(present) == len(dys) else zeros)(x.shape, dtype)
    write = c_strides(x.shape)
    start = 0
    for dy, size in zip(dys, sizes):
        if dy is not None:
            shape = list(x.shape)
            shape[axis] = size
            read = broadcast_strides(dy.shape, strides_of(dy), shape, "SplitGradient dY")
            copy_into(
                dx, dy, shape, read, write, dst_offset=start * write[axis], op="SplitGradient"
            )
        start += size
    return (dx,)


# -- shapes as tensors -------------------------------------------------------------------


@register("Shape", device="cuda")
def shape_cuda(x, start, end):
    return (upload(np.array(tuple(x.shape)[start:end], dtype=np.int64)),)


@register("Size", device="cuda")
def size_cuda(data):
    return (upload(np.array(math.prod(data.shape), np.int64)),)
