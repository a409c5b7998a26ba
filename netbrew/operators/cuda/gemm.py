"""CUDA MatMul, Gemm and FC, their gradients and GemmRelu / FCRelu, on cuBLAS (gemm.cu).

Every product goes through `gemm`: cuBLAS (netbrew.cuda.cublas) where the library loads,
else gemm.cu's tiled kernel ("keep a kernel of your own wherever the library is missing";
NETBREW_CUBLAS=0 asks for it too). Batch dims that broadcast become batch strides of 0, or
an expanded copy where one stride cannot say it; gradients that were broadcast are summed
back with `reduce_sum`. float16 runs with float32 accumulation. The helpers here (device
pointers, casts, broadcasts, reductions) serve conv.py and pool.py as well.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from netbrew import cuda
from netbrew.cuda import DeviceError, cublas
from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.cuda.launch import MAX_GRID, MAX_RANK, constant, empty, grid, suffix
from netbrew.operators.cuda.launch import kernel as _kernel
from netbrew.operators.schema import kernel as register

FAMILY = "gemm"
FLOATS = (np.dtype(np.float32), np.dtype(np.float16))
TILE = 16  # gemm.cu's NB_TILE
SMALL_REDUCTION = 32  # up to this many summands per output: one thread each
REDUCE_BLOCK = 256  # window.cuh's NB_REDUCE_BLOCK: the block of every block-per-row kernel


# --- device pointers, kernels, casts ---------------------------------------------------


def device() -> int:
    """The device whose context is current on this thread (the op's; 0 if none is)."""
    return getattr(cuda._thread, "device", None) or 0


def fn(family: str, name: str) -> Any:
    """Kernel `name` of `family`.cu, compiled for the current device."""
    return _kernel(family, name, device())


def addr(a: Any, offset: int = 0) -> int:
    """The device address of element `offset` of GPUArray `a` (0 for an empty array)."""
    if a.gpudata is None:
        return 0
    return int(a.gpudata) + offset * a.dtype.itemsize


def ptr(a: Any, offset: int = 0) -> np.uintp:
    """`addr` as a kernel argument; None (an omitted input) is a null pointer."""
    return np.uintp(0 if a is None else addr(a, offset))


def cast(x: Any, dtype: Any, op: str) -> Any:
    """x in `dtype` (x itself if it has it); float32 <-> float16 only, else TypeError."""
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    if x.dtype not in FLOATS or dtype not in FLOATS:
        raise TypeError(f"{op}: no CUDA cast from {x.dtype} to {dtype} (float32/float16 only)")
    y = empty(x.shape, dtype)
    if x.size:
        name = f"cast_{suffix(x.dtype, op)}_{suffix(dtype, op)}"
        fn(FAMILY, name)(ptr(x), ptr(y), np.int64(x.size), **grid(x.size))
    return y


def relu_(y: Any) -> Any:
    """Relu over a kernel's fresh output, in place (NaN stays NaN, as on the CPU)."""
    if y.size:
        fn(FAMILY, f"relu_inplace_{suffix(y.dtype, 'Relu')}")(
            ptr(y), np.int64(y.size), **grid(y.size)
        )
    return y


def _strides(shape: Sequence[int]) -> list[int]:
    out, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        out[d], step = step, step * shape[d]
    return out


def broadcast_into(src: Any, src_shape: Sequence[int], dst: Any, dst_shape: Sequence[int]) -> None:
    """dst (dst_shape) = src (src_shape, NumPy-broadcastable to it), same dtype."""
    n = math.prod(dst_shape)
    if not n:
        return
    rank = len(dst_shape)
    padded = [1] * (rank - len(src_shape)) + list(src_shape)
    strides = [
        0 if p == 1 and o != 1 else s for p, o, s in zip(padded, dst_shape, _strides(padded))
    ]
    if rank > MAX_RANK:
        raise ValueError(f"rank {rank} is over the CUDA kernels' limit of {MAX_RANK}")
    pad = [0] * (MAX_RANK - rank)
    meta = constant([*dst_shape, *pad, *strides, *pad])
    name = f"broadcast_copy_{suffix(dst.dtype, 'broadcast')}"
    fn(FAMILY, name)(ptr(src), ptr(dst), meta, np.int32(rank), np.int64(n), **grid(n))


def reduce_sum(
    x: Any, in_shape: Sequence[int], out: Any, out_shape: Sequence[int], scale: float = 1.0
) -> None:
    """out = scale * x summed over the axes where out_shape (same rank as in_shape) is 1.

    Runs of kept or of summed axes merge first, so the index math sees few axes."""
    if len(out_shape) != len(in_shape) or any(o not in (1, i) for o, i in zip(out_shape, in_shape)):
        raise ShapeError(f"shape {list(out_shape)} does not broadcast to {list(in_shape)}")
    n_out = math.prod(out_shape)
    if not n_out:
        return
    axes: list[list[int]] = []  # [size, reduced?] per merged axis
    for i, o in zip(in_shape, out_shape):
        if i == 1:
            continue
        kind = int(o == 1)
        if axes and axes[-1][1] == kind:
            axes[-1][0] *= i
        else:
            axes.append([i, kind])
    if len(axes) > MAX_RANK:
        raise ValueError(f"a reduction over {len(axes)} alternating axes is over {MAX_RANK}")
    sizes = [a for a, _ in axes] or [1]
    keep = [a if not r else 1 for a, r in axes] or [1]
    red = [a if r else 1 for a, r in axes] or [1]
    rank = len(sizes)
    pad = [0] * (MAX_RANK - rank)
    meta = constant([*keep, *pad, *red, *pad, *_strides(sizes), *pad])
    n_red = math.prod(red)
    tag = suffix(x.dtype, "reduce")
    args = (ptr(x), ptr(out), meta, np.int32(rank), np.int64(n_out), np.int64(n_red))
    if n_red <= SMALL_REDUCTION:
        fn(FAMILY, f"sum_reduce_small_{tag}")(*args, np.float32(scale), **grid(n_out))
    else:
        blocks = max(1, min(n_out, MAX_GRID))
        launch = {"grid": (blocks, 1, 1), "block": (REDUCE_BLOCK, 1, 1)}
        fn(FAMILY, f"sum_reduce_{tag}")(*args, np.float32(scale), **launch)


# --- GEMM: cuBLAS, or gemm.cu's tiled kernel ------------------------------------------

_disabled: dict[int, str] = {}  # device -> why cuBLAS is not used there
_warn_lock = threading.Lock()


def use_cublas() -> bool:
    """Whether GEMMs on the current device go to cuBLAS: it loads, a handle can be created,
    and NETBREW_CUBLAS is not 0. A library that loads but cannot start warns once."""
    if os.environ.get("NETBREW_CUBLAS", "1") == "0":
        return False
    dev = device()
    if dev in _disabled:
        return False
    if not cublas.available():
        return False
    try:
        cublas.handle(dev)
    except DeviceError as e:
        with _warn_lock:
            if dev not in _disabled:
                _disabled[dev] = str(e)
                message = f"cuBLAS unusable on cuda:{dev} ({e}); using netbrew's own GEMM"
                warnings.warn(message, stacklevel=3)
        return False
    return True


def gemm(
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
    """Row major, for z < batch: C[z] (m, n) = alpha * op(A[z]) (m, k) op(B[z]) (k, n) +
    beta * C[z], on device addresses a, b, c; leading dims and strides in elements.
    C is not read when beta is 0."""
    if not (m and n and batch):
        return
    if k and use_cublas():
        cublas.gemm(device(), dtype, trans_a, trans_b, m, n, k, alpha, a, lda, stride_a,
                    b, ldb, stride_b, beta, c, ldc, stride_c, batch)  # fmt: skip
        return
    tiled = fn(FAMILY, f"gemm_tiled_{suffix(dtype, 'GEMM')}")
    blocks = (-(-n // TILE), min(-(-m // TILE), 65535), min(batch, 65535))
    i64 = np.int64
    tiled(np.uintp(a), np.uintp(b), np.uintp(c), i64(m), i64(n), i64(k), i64(lda), i64(ldb),
          i64(ldc), i64(stride_a), i64(stride_b), i64(stride_c), i64(batch),
          np.int32(trans_a), np.int32(trans_b), np.float32(alpha), np.float32(beta),
          grid=blocks, block=(TILE, TILE, 1))  # fmt: skip


def _operand(x: Any, shape: Sequence[int], batch: Sequence[int]) -> tuple[Any, int]:
    """A matrix operand of `shape` (..., r, c) over the output's `batch` dims: the array to
    read and its batch stride (0: one matrix for all; an expanded copy where batch dims
    broadcast partly)."""
    size = shape[-1] * shape[-2]
    own = math.prod(shape[:-2])
    if own == math.prod(batch):
        return x, size
    if own == 1:
        return x, 0
    full = (*batch, shape[-2], shape[-1])
    copy = empty(full, x.dtype)
    broadcast_into(x, shape, copy, full)
    return copy, size


def batched_matmul(
    a: Any, a_shape, b: Any, b_shape, out: Any, batch, *, trans_a=False, trans_b=False, beta=0.0
) -> None:
    """out (batch, m, n) = op(A) op(B) over the broadcast `batch` dims; shapes as stored."""
    a_arr, sa = _operand(a, a_shape, batch)
    b_arr, sb = _operand(b, b_shape, batch)
    m = a_shape[-1] if trans_a else a_shape[-2]
    k = a_shape[-2] if trans_a else a_shape[-1]
    n = b_shape[-2] if trans_b else b_shape[-1]
    gemm(out.dtype, trans_a, trans_b, m, n, k, 1.0, addr(a_arr), a_shape[-1], sa, addr(b_arr),
         b_shape[-1], sb, beta, addr(out), n, m * n, math.prod(batch))  # fmt: skip


# --- MatMul ----------------------------------------------------------------------------


def _same_dtype(op: str, a: Any, b: Any, names: tuple[str, str]) -> None:
    if a.dtype != b.dtype:
        raise SchemaError(
            f"{op}: input {names[1]} has dtype {b.dtype}, expected {a.dtype} like input "
            f"{names[0]}; cast one of them first"
        )


def _promoted(a: Any, b: Any) -> tuple[tuple, tuple, tuple]:
    """MatMul's shapes: A as (..., M, K), B as (..., K, N) (1-D operands promoted) and the
    broadcast batch dims; ShapeError as the CPU kernel words it."""
    if a.ndim == 0 or b.ndim == 0:
        which = "A" if a.ndim == 0 else "B"
        raise ShapeError(f"MatMul: input {which} is a scalar, expected at least 1 dim")
    a2 = (1, *a.shape) if a.ndim == 1 else tuple(a.shape)
    b2 = (*b.shape, 1) if b.ndim == 1 else tuple(b.shape)
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"MatMul: inner dims differ: A {list(a.shape)} has K={a2[-1]} in its last dim, "
            f"B {list(b.shape)} has K={b2[-2]} in dim {0 if b.ndim == 1 else b.ndim - 2}"
        )
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ShapeError(
            f"MatMul: batch dims {list(a.shape[:-2])} of A and {list(b.shape[:-2])} of B "
            "do not broadcast"
        ) from None
    return a2, b2, tuple(batch)


@register("MatMul", device="cuda")
def matmul_cuda(a, b):
    """Y = A @ B with numpy's 1-D promotion and batch broadcasting."""
    _same_dtype("MatMul", a, b, ("A", "B"))
    suffix(a.dtype, "MatMul")
    a2, b2, batch = _promoted(a, b)
    shape = [*batch] + ([a2[-2]] if a.ndim > 1 else []) + ([b2[-1]] if b.ndim > 1 else [])
    y = empty(shape, a.dtype)
    batched_matmul(a, a2, b, b2, y, batch)
    return (y,)


@register("MatMulGradient", device="cuda")
def matmul_gradient_cuda(a, b, dy, *, output_mask):
    """dA = dY @ Bᵀ, dB = Aᵀ @ dY, each summed over the batch dims its operand was
    broadcast along."""
    suffix(a.dtype, "MatMulGradient")
    _same_dtype("MatMulGradient", a, b, ("A", "B"))
    _same_dtype("MatMulGradient", a, dy, ("A", "dY"))
    a2, b2, batch = _promoted(a, b)
    m, k, n = a2[-2], a2[-1], b2[-1]
    dy2 = (*batch, m, n)
    if math.prod(dy2) != dy.size:
        raise ShapeError(f"MatMulGradient: dY has shape {list(dy.shape)}, expected {list(dy2)}")
    da = db = None
    if output_mask[0]:
        da = empty(a.shape, a.dtype)
        _summed(da, a2, batch, partial(batched_matmul, dy, dy2, b, b2, batch=batch, trans_b=True))
    if len(output_mask) > 1 and output_mask[1]:
        db = empty(b.shape, b.dtype)
        if math.prod(b2[:-2]) == 1 and math.prod(a2[:-2]) == math.prod(batch):
            # one B for every batch: dB = A_flatᵀ @ dY_flat with the batch folded into M
            rows = math.prod(batch) * m
            gemm(a.dtype, True, False, k, n, rows, 1.0, addr(a), k, 0, addr(dy), n, 0, 0.0,
                 addr(db), n, 0)  # fmt: skip
        else:
            product = partial(batched_matmul, a, a2, dy, dy2, batch=batch, trans_a=True)
            _summed(db, b2, batch, product)
    return da, db


def _summed(out: Any, shape: Sequence[int], batch: Sequence[int], product) -> None:
    """Runs `product(into)` over the full batch, summed into `out` (of `shape`, matrix dims
    last) where its batch dims broadcast; straight into `out` where they do not."""
    if math.prod(shape[:-2]) == math.prod(batch):
        product(out)
        return
    full = (*batch, *shape[-2:])
    tmp = empty(full, out.dtype)
    product(tmp)
    target = (1,) * (len(full) - len(shape)) + tuple(shape)
    reduce_sum(tmp, full, out, target)


# --- Gemm ------------------------------------------------------------------------------


def _gemm_dims(a, b, trans_a, trans_b, op: str) -> tuple[int, int, int]:
    for name, x in (("A", a), ("B", b)):
        if x.ndim != 2:
            raise ShapeError(f"{op}: input {name} has {x.ndim} dims, expected 2")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    kb, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != kb:
        raise ShapeError(
            f"{op}: A' is {[m, k]} and B' is {[kb, n]} (transA={trans_a}, transB={trans_b}); "
            f"their inner dims {k} and {kb} differ"
        )
    return m, n, k


def _broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    try:
        return np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        return False


@register("Gemm", device="cuda")
def gemm_cuda(a, b, c=None, *, alpha, beta, transA, transB):
    """Y = alpha * A' @ B' + beta * C (C broadcast to (M, N))."""
    _same_dtype("Gemm", a, b, ("A", "B"))
    suffix(a.dtype, "Gemm")
    m, n, k = _gemm_dims(a, b, transA, transB, "Gemm")
    y = empty((m, n), a.dtype)
    with_c = c is not None and beta != 0.0
    if with_c:
        if not _broadcasts_to(c.shape, (m, n)):
            raise ShapeError(
                f"Gemm: input C has shape {list(c.shape)}, which does not broadcast to "
                f"(M, N) = {[m, n]}"
            )
        broadcast_into(cast(c, a.dtype, "Gemm"), c.shape, y, (m, n))
    gemm(a.dtype, bool(transA), bool(transB), m, n, k, alpha, addr(a), a.shape[1], 0,
         addr(b), b.shape[1], 0, beta if with_c else 0.0, addr(y), n, 0)  # fmt: skip
    return (y,)


@register("GemmGradient", device="cuda")
def gemm_gradient_cuda(a, b, dy, c=None, *, alpha, beta, transA, transB, output_mask):
    """dA' = alpha * dY @ B'ᵀ, dB' = alpha * A'ᵀ @ dY, dC = beta * dY summed to C's shape."""
    suffix(a.dtype, "GemmGradient")
    m, n, k = _gemm_dims(a, b, transA, transB, "GemmGradient")
    _same_dtype("GemmGradient", a, dy, ("A", "dY"))
    if tuple(dy.shape) != (m, n):
        raise ShapeError(f"GemmGradient: dY has shape {list(dy.shape)}, expected {[m, n]}")
    da = db = dc = None
    lda, ldb = a.shape[1], b.shape[1]
    if output_mask[0]:
        da = empty(a.shape, a.dtype)
        if transA:  # dA = B' dYᵀ (K, M)
            gemm(a.dtype, bool(transB), True, k, m, n, alpha, addr(b), ldb, 0, addr(dy), n, 0,
                 0.0, addr(da), m, 0)  # fmt: skip
        else:  # dA = dY B'ᵀ (M, K)
            gemm(a.dtype, False, not transB, m, k, n, alpha, addr(dy), n, 0, addr(b), ldb, 0,
                 0.0, addr(da), k, 0)  # fmt: skip
    if len(output_mask) > 1 and output_mask[1]:
        db = empty(b.shape, b.dtype)
        if transB:  # dB = dYᵀ A' (N, K)
            gemm(a.dtype, True, bool(transA), n, k, m, alpha, addr(dy), n, 0, addr(a), lda, 0,
                 0.0, addr(db), k, 0)  # fmt: skip
        else:  # dB = A'ᵀ dY (K, N)
            gemm(a.dtype, not transA, False, k, n, m, alpha, addr(a), lda, 0, addr(dy), n, 0,
                 0.0, addr(db), n, 0)  # fmt: skip
    if len(output_mask) > 2 and output_mask[2]:
        if c is None:
            raise ValueError("GemmGradient: output dC is named but input C is missing")
        if len(c.shape) > 2:
            raise ShapeError(f"cannot sum shape {[m, n]} down to longer {list(c.shape)}")
        summed = empty(c.shape, dy.dtype)
        reduce_sum(dy, (m, n), summed, (1,) * (2 - len(c.shape)) + tuple(c.shape), beta)
        dc = cast(summed, c.dtype, "GemmGradient")
    return da, db, dc


# --- FC --------------------------------------------------------------------------------


def flat_dims(shape: Sequence[int], axis: int, op: str, name: str, attr: str) -> tuple[int, int]:
    """(rows, cols) of `shape` flattened at `axis`, as matmul._flatten checks it."""
    ndim = len(shape)
    if not -ndim <= axis <= ndim:
        raise ShapeError(f"{op}: {attr}={axis} is out of range for input {name} with {ndim} dims")
    axis = axis + ndim if axis < 0 else axis
    return math.prod(shape[:axis]), math.prod(shape[axis:])


@register("FC", device="cuda")
def fc_cuda(x, w, b, *, axis, axis_w):
    """Caffe2's fully connected layer: Y = flatten(X, axis) · Wᵀ + b."""
    _same_dtype("FC", x, w, ("X", "W"))
    suffix(x.dtype, "FC")
    rows, kx = flat_dims(x.shape, axis, "FC", "X", "axis")
    n, k = flat_dims(w.shape, axis_w, "FC", "W", "axis_w")
    if kx != k:
        raise ShapeError(
            f"FC: X {list(x.shape)} flattened at axis={axis} has K={kx}, "
            f"W {list(w.shape)} flattened at axis_w={axis_w} has K={k}"
        )
    if b.size != n:
        raise ShapeError(f"FC: input b has {b.size} elements, expected N={n} (rows of W)")
    lead = x.shape[: axis + x.ndim if axis < 0 else axis]
    y = empty((*lead, n), x.dtype)
    broadcast_into(cast(b, x.dtype, "FC"), (1, n), y, (rows, n))
    gemm(x.dtype, False, True, rows, n, k, 1.0, addr(x), k, 0, addr(w), k, 0, 1.0, addr(y), n, 0)
    return (y,)


@register("FCGradient", device="cuda")
def fc_gradient_cuda(x, w, dy, b=None, *, axis, axis_w, output_mask):
    """dW = dY2ᵀ @ X2, db = sum(dY2, 0), dX = dY2 @ W2 (Caffe2's output order)."""
    suffix(x.dtype, "FCGradient")
    _same_dtype("FCGradient", x, w, ("X", "W"))
    _same_dtype("FCGradient", x, dy, ("X", "dY"))
    n, k = flat_dims(w.shape, axis_w, "FCGradient", "W", "axis_w")
    rows = dy.size // n if n else 0
    if rows * n != dy.size:
        raise ShapeError(f"FCGradient: dY {list(dy.shape)} does not split into rows of N={n}")
    dw = db = dx = None
    if output_mask[0] or (len(output_mask) > 2 and output_mask[2]):
        xr, xk = flat_dims(x.shape, axis, "FCGradient", "X", "axis")
        if (xr, xk) != (rows, k):
            raise ShapeError(
                f"FCGradient: X {list(x.shape)} flattened at axis={axis} is {[xr, xk]}, "
                f"expected {[rows, k]} from dY and W"
            )
    if output_mask[0]:
        dw = empty(w.shape, w.dtype)
        gemm(x.dtype, True, False, n, k, rows, 1.0, addr(dy), n, 0, addr(x), k, 0, 0.0,
             addr(dw), k, 0)  # fmt: skip
    if len(output_mask) > 1 and output_mask[1]:
        summed = empty((n,), dy.dtype)
        reduce_sum(dy, (rows, n), summed, (1, n))
        if b is None:
            db = summed
        else:
            if b.size != n:
                raise ShapeError(f"FCGradient: input b has {b.size} elements, expected N={n}")
            db = (
                cast(summed, b.dtype, "FCGradient").reshape(b.shape)
                if n
                else empty(b.shape, b.dtype)
            )
    if len(output_mask) > 2 and output_mask[2]:
        dx = empty(x.shape, x.dtype)
        gemm(x.dtype, False, False, rows, k, n, 1.0, addr(dy), n, 0, addr(w), k, 0, 0.0,
             addr(dx), k, 0)  # fmt: skip
    return dw, db, dx


# --- fused with Relu -------------------------------------------------------------------


@register("GemmRelu", device="cuda")
def gemm_relu_cuda(*arrays, **attrs):
    """Gemm, then Relu on its output in place."""
    return (relu_(gemm_cuda(*arrays, **attrs)[0]),)


@register("FCRelu", device="cuda")
def fc_relu_cuda(*arrays, **attrs):
    """FC, then Relu on its output in place."""
    return (relu_(fc_cuda(*arrays, **attrs)[0]),)
