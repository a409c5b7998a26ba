"""Gradients of MatMul, Gemm and FC, each computed by one dedicated op with an output mask.

    MatMul(A, B) -> Y     backward: MatMulGradient(A, B, dY) -> (dA, dB)
    Gemm(A, B, C) -> Y    backward: GemmGradient(A, B, dY, C) -> (dA, dB, dC)
    FC(X, W, b) -> Y      backward: FCGradient(X, W, dY, b) -> (dW, db, dX)   (Caffe2's order)

Input gradients that are not wanted are named "" and not computed.
"""

from __future__ import annotations

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.matmul import _flatten, _matmul
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

schema(
    "MatMulGradient",
    inputs=["A", "B", "dY"],
    outputs=["dA", "dB"],
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dA = dY @ Bᵀ, dB = Aᵀ @ dY with MatMul's 1-D promotion, each summed over the batch "
    "dims its operand was broadcast along; dA has A's shape, dB has B's",
)


@gradient("MatMul")
def matmul_grad(op, g_out, g_in):
    return [op_def("MatMulGradient", [*op.input, g_out[0]], [g or "" for g in g_in])]


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


@kernel("MatMulGradient")
def matmul_gradient_cpu(
    a: np.ndarray, b: np.ndarray, dy: np.ndarray, *, output_mask: tuple[bool, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    # Promote 1-D operands as the forward did, and give dY back the dims it dropped.
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    dy2 = dy[..., None] if b.ndim == 1 else dy
    dy2 = np.expand_dims(dy2, -2) if a.ndim == 1 else dy2
    batch = list(range(dy2.ndim - 2))
    da = db = None
    if output_mask[0]:
        if a2.ndim == 2 and batch:  # one A for every batch: a single contraction
            da = np.tensordot(dy2, b2, axes=(batch + [-1], batch + [-1]))
        else:
            da = sum_to_shape(np.matmul(dy2, _swap(b2)), a2.shape)
        da = da.reshape(a.shape).astype(a.dtype, copy=False)
    if output_mask[1]:
        if b2.ndim == 2 and batch:  # one B for every batch: fold the batch into M
            db = np.tensordot(a2, dy2, axes=(batch + [-2], batch + [-2]))
        else:
            db = sum_to_shape(np.matmul(_swap(a2), dy2), b2.shape)
        db = db.reshape(b.shape).astype(b.dtype, copy=False)
    return da, db


schema(
    "GemmGradient",
    inputs=["A", "B", "dY", "C?"],
    outputs=["dA", "dB", "dC?"],
    attrs={"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="with A' = A (or Aᵀ if transA), B' likewise: dA' = alpha * dY @ B'ᵀ, dB' = alpha * "
    "A'ᵀ @ dY, dC = beta * dY summed to C's shape; dA, dB have A's and B's shapes; "
    "defaults alpha=1.0, beta=1.0, transA=0, transB=0",
)


@gradient("Gemm")
def gemm_grad(op, g_out, g_in):
    inputs = [op.input[0], op.input[1], g_out[0]]
    if len(g_in) > 2 and g_in[2]:
        inputs.append(op.input[2])
    return [op_def("GemmGradient", inputs, [g or "" for g in g_in], **copy_attrs(op))]


@kernel("GemmGradient")
def gemm_gradient_cpu(
    a: np.ndarray,
    b: np.ndarray,
    dy: np.ndarray,
    c: np.ndarray | None = None,
    *,
    alpha: float,
    beta: float,
    transA: int,
    transB: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, ...]:
    a_, b_ = (a.T if transA else a), (b.T if transB else b)
    da = db = dc = None
    if output_mask[0]:
        da = alpha * _matmul(dy, b_.T)
        da = (da.T if transA else da).astype(a.dtype, copy=False)
    if output_mask[1]:
        db = alpha * _matmul(a_.T, dy)
        db = (db.T if transB else db).astype(b.dtype, copy=False)
    if len(output_mask) > 2 and output_mask[2]:
        if c is None:
            raise ValueError("GemmGradient: output dC is named but input C is missing")
        dc = (beta * sum_to_shape(dy, c.shape)).astype(c.dtype, copy=False)
    return da, db, dc


schema(
    "FCGradient",
    inputs=["X", "W", "dY", "b?"],
    outputs=["dW", "db", "dX?"],
    attrs={"axis": 1, "axis_w": 1},
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="with X2 = flatten(X, axis) (M, K), W2 = flatten(W, axis_w) (N, K), dY2 (M, N): "
    "dW = dY2ᵀ @ X2 in W's shape, db = sum(dY2, 0) in b's shape (N,) when b is absent), "
    "dX = dY2 @ W2 in X's shape; Caffe2's output order; defaults axis=1, axis_w=1",
)


@gradient("FC")
def fc_grad(op, g_out, g_in):
    x, w, b = op.input
    dx, dw, db = g_in
    inputs = [x, w, g_out[0]] + ([b] if db else [])
    return [op_def("FCGradient", inputs, [dw or "", db or "", dx or ""], **copy_attrs(op))]


@kernel("FCGradient")
def fc_gradient_cpu(
    x: np.ndarray,
    w: np.ndarray,
    dy: np.ndarray,
    b: np.ndarray | None = None,
    *,
    axis: int,
    axis_w: int,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, ...]:
    w2 = _flatten(w, axis_w, "FCGradient", "W", "axis_w")
    dy2 = dy.reshape(-1, w2.shape[0])
    dw = db = dx = None
    if output_mask[0]:
        x2 = _flatten(x, axis, "FCGradient", "X", "axis")
        dw = _matmul(dy2.T, x2).reshape(w.shape)
    if output_mask[1]:
        db = dy2.sum(axis=0).reshape(w2.shape[0] if b is None else b.shape)
        db = db.astype(dy.dtype if b is None else b.dtype, copy=False)
    if len(output_mask) > 2 and output_mask[2]:
        dx = _matmul(dy2, w2).reshape(x.shape)
    return dw, db, dx
