"""MatMul, Gemm and Caffe2's FC."""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, schema

schema(
    "MatMul",
    inputs=["A", "B"],
    outputs=["Y"],
    dtypes="numeric",
    doc="Y = A @ B, numpy.matmul semantics: 1-D A is (1, K), 1-D B is (K, 1) and the added "
    "dim is dropped; A (..., M, K), B (..., K, N) -> Y (broadcast(...), M, N)",
)

schema(
    "Gemm",
    inputs=["A", "B", "C?"],
    outputs=["Y"],
    attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
    dtypes="numeric",
    doc="Y = alpha * A' @ B' + beta * C; A' = A (M, K) or A.T if transA, B' = B (K, N) or B.T "
    "if transB, C broadcast to (M, N); defaults alpha=1.0, beta=1.0, transA=0, transB=0",
)

schema(
    "FC",
    inputs=["X", "W", "b"],
    outputs=["Y"],
    attrs={"axis": 1, "axis_w": 1},
    dtypes="numeric",
    onnx=False,
    doc="Y = flatten(X, axis) · Wᵀ + b; X (d0..d[axis-1], K...), W (N..., K...) flattened at "
    "axis_w to (N, K), b (N,) -> Y (d0..d[axis-1], N); defaults axis=1, axis_w=1",
)


def _same_dtype(op: str, a: np.ndarray, b: np.ndarray, names: tuple[str, str]) -> None:
    if a.dtype != b.dtype:
        raise SchemaError(
            f"{op}: input {names[1]} has dtype {b.dtype}, expected {a.dtype} like input "
            f"{names[0]}; cast one of them first"
        )


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul that keeps the input dtype (bfloat16 products come back as float32)."""
    return np.matmul(a, b).astype(a.dtype, copy=False)


@kernel("MatMul")
def matmul_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    """Y = A @ B with numpy's 1-D promotion and batch broadcasting."""
    _same_dtype("MatMul", a, b, ("A", "B"))
    if a.ndim == 0 or b.ndim == 0:
        which = "A" if a.ndim == 0 else "B"
        raise ShapeError(f"MatMul: input {which} is a scalar, expected at least 1 dim")
    k_a = a.shape[-1]
    k_b = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if k_a != k_b:
        raise ShapeError(
            f"MatMul: inner dims differ: A {list(a.shape)} has K={k_a} in its last dim, "
            f"B {list(b.shape)} has K={k_b} in dim {0 if b.ndim == 1 else b.ndim - 2}"
        )
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(
            f"MatMul: batch dims {list(a.shape[:-2])} of A and {list(b.shape[:-2])} of B "
            "do not broadcast"
        ) from None
    return (_matmul(a, b),)


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


@kernel("Gemm")
def gemm_cpu(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    *,
    alpha: float,
    beta: float,
    transA: int,
    transB: int,
) -> tuple[np.ndarray]:
    """Y = alpha * A' @ B' + beta * C."""
    _same_dtype("Gemm", a, b, ("A", "B"))
    for name, x in (("A", a), ("B", b)):
        if x.ndim != 2:
            raise ShapeError(f"Gemm: input {name} has {x.ndim} dims, expected 2")
    a = a.T if transA else a
    b = b.T if transB else b
    if a.shape[1] != b.shape[0]:
        raise ShapeError(
            f"Gemm: A' is {list(a.shape)} and B' is {list(b.shape)} (transA={transA}, "
            f"transB={transB}); their inner dims {a.shape[1]} and {b.shape[0]} differ"
        )
    y = _matmul(a, b)
    if alpha != 1.0:
        y = alpha * y
    if c is not None and beta != 0.0:
        target = (a.shape[0], b.shape[1])
        if not _broadcasts_to(c.shape, target):
            raise ShapeError(
                f"Gemm: input C has shape {list(c.shape)}, which does not broadcast to "
                f"(M, N) = {list(target)}"
            )
        y = y + (c if beta == 1.0 else beta * c)
    return (y.astype(a.dtype, copy=False),)


def _flatten(x: np.ndarray, axis: int, op: str, name: str, attr: str) -> np.ndarray:
    if not -x.ndim <= axis <= x.ndim:
        raise ShapeError(f"{op}: {attr}={axis} is out of range for input {name} with {x.ndim} dims")
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@kernel("FC")
def fc_cpu(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, *, axis: int, axis_w: int
) -> tuple[np.ndarray]:
    """Caffe2's fully connected layer: Y = flatten(X, axis) · Wᵀ + b."""
    _same_dtype("FC", x, w, ("X", "W"))
    x2 = _flatten(x, axis, "FC", "X", "axis")
    w2 = _flatten(w, axis_w, "FC", "W", "axis_w")
    n, k = w2.shape
    if x2.shape[1] != k:
        raise ShapeError(
            f"FC: X {list(x.shape)} flattened at axis={axis} has K={x2.shape[1]}, "
            f"W {list(w.shape)} flattened at axis_w={axis_w} has K={k}"
        )
    if b.size != n:
        raise ShapeError(f"FC: input b has {b.size} elements, expected N={n} (rows of W)")
    lead = x.shape[: axis + x.ndim if axis < 0 else axis]
    y = _matmul(x2, w2.T) + b.reshape(n).astype(x.dtype, copy=False)
    return (y.reshape(*lead, n),)
