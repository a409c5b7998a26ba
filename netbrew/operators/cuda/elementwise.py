"""CUDA kernels of the unary elementwise ops (elementwise.cu): unary math, the activations
and Clip, and their gradients; and the launch helpers that the elementwise_* and optim
modules share.

Each kernel keeps its CPU twin's signature and semantics. float16 is computed in float32
and rounded once (the NumPy kernels round after each step, so float16 results may differ
in the last bits); float32 exp, log, sin, cos, tanh and erf are evaluated in float64,
since --use_fast_math makes the float32 ones approximate (see elementwise.cuh). Kernels
take GPUArrays and launch nothing for empty tensors, whose GPUArrays have no device memory
to pass (a null gpudata is not a valid kernel argument).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.arithmetic import check_same_dtype
from netbrew.operators.cuda.launch import broadcast_meta, empty, grid, kernel, suffix
from netbrew.operators.schema import kernel as register
from netbrew.operators.unary_math import check_float, check_real

FAMILY = "elementwise"
FLOAT = ("f32", "f16", "f64")
INT = ("i32", "i64")
NUMERIC = FLOAT + INT
NULL = np.uintp(0)  # a null pointer: an omitted optional input, or no broadcast metadata


# --- helpers shared by the elementwise families ----------------------------------------------


def launch(family: str, name: str, n: int, arrays: Sequence[Any], *scalars: Any) -> None:
    """Runs kernel `name(*arrays, int64 n, *scalars)` of `family` over n threads; nothing
    when n is 0. Scalars must be NumPy scalars of the kernel's parameter types."""
    if n:
        kernel(family, name)(*arrays, np.int64(n), *scalars, **grid(n))


def broadcast(out_shape: Sequence[int], *shapes: Sequence[int]) -> tuple[Any, np.int32]:
    """(meta, rank) for nb_off: NULL and rank -1 when every input has the output's shape,
    else launch.broadcast_meta's GPU array (keep it referenced until the launch)."""
    out = tuple(int(d) for d in out_shape)
    if all(tuple(int(d) for d in s) == out for s in shapes):
        return NULL, np.int32(-1)
    return broadcast_meta(out, *shapes), np.int32(len(out))


def same_dtype(op: str, **arrays: Any) -> np.dtype:
    """The dtype the named GPUArrays share (None entries skipped); TypeError otherwise."""
    given = {k: v for k, v in arrays.items() if v is not None}
    dtypes = {np.dtype(v.dtype) for v in given.values()}
    if len(dtypes) > 1:
        listed = ", ".join(f"{k} {np.dtype(v.dtype)}" for k, v in given.items())
        raise TypeError(f"{op}: the CUDA kernel needs one dtype for {listed}")
    return dtypes.pop()


def fill(value: float, shape: Sequence[int], dtype: Any) -> Any:
    """A new GPUArray of `value` (launch.zeros cannot fill an empty array)."""
    out = empty(shape, dtype)
    tag = suffix(dtype, "fill", FLOAT + INT + ("b8",))
    launch("elementwise_cast", f"fill_{tag}", out.size, (out,), np.float64(value))
    return out


def copy(x: Any) -> Any:
    """A device copy of x (GPUArray.copy cannot copy an empty array)."""
    return x.copy() if x.size else empty(x.shape, x.dtype)


# --- unary math and activations -------------------------------------------------------------


def unary(op: str, name: str, x: Any, allowed=FLOAT, a: float = 0.0, b: float = 0.0) -> tuple:
    y = empty(x.shape, x.dtype)
    tag = suffix(x.dtype, op, allowed)
    launch(FAMILY, f"{name}_{tag}", x.size, (x, y), np.float64(a), np.float64(b))
    return (y,)


def _simple(op: str, name: str, allowed: Sequence[str], check=None) -> None:
    def unary_cuda(x):
        if check is not None:
            check(x, "X" if op in ("Floor", "Ceil") else "input")
        return unary(op, name, x, allowed)

    unary_cuda.__name__ = f"{name}_cuda"
    register(op, device="cuda")(unary_cuda)


for _op, _name, _allowed, _check in (
    ("Neg", "neg", NUMERIC, None),
    ("Abs", "abs", NUMERIC, None),
    ("Sign", "sign", NUMERIC, check_real),
    ("Exp", "exp", FLOAT, None),
    ("Log", "log", FLOAT, None),
    ("Sqrt", "sqrt", FLOAT, None),
    ("Reciprocal", "reciprocal", FLOAT, None),
    ("Sin", "sin", FLOAT, check_float),
    ("Cos", "cos", FLOAT, check_float),
    ("Tanh", "tanh", FLOAT, None),
    ("Erf", "erf", FLOAT, check_float),
    ("Floor", "floor", FLOAT, check_float),
    ("Ceil", "ceil", FLOAT, check_float),
    ("Sigmoid", "sigmoid", FLOAT, None),
    ("Softplus", "softplus", FLOAT, None),
):
    _simple(_op, _name, _allowed, _check)


@register("LeakyRelu", device="cuda")
def leaky_relu_cuda(x, alpha: float):
    return unary("LeakyRelu", "leaky_relu", x, a=alpha)


@register("Elu", device="cuda")
def elu_cuda(x, alpha: float):
    return unary("Elu", "elu", x, a=alpha)


@register("Selu", device="cuda")
def selu_cuda(x, alpha: float, gamma: float):
    return unary("Selu", "selu", x, a=alpha, b=gamma)


@register("HardSigmoid", device="cuda")
def hard_sigmoid_cuda(x, alpha: float, beta: float):
    return unary("HardSigmoid", "hard_sigmoid", x, a=alpha, b=beta)


@register("HardSwish", device="cuda")
def hard_swish_cuda(x):
    check_float(x, "X")
    return unary("HardSwish", "hard_swish", x)


def _gelu_name(approximate: str) -> str:
    if approximate not in ("none", "tanh"):
        raise ValueError(f"argument 'approximate' is {approximate!r}, expected 'none' or 'tanh'")
    return "gelu" if approximate == "none" else "gelu_tanh"


@register("Gelu", device="cuda")
def gelu_cuda(x, approximate: str):
    return unary("Gelu", _gelu_name(approximate), x)


def _bound(op: str, x: Any, name: str, bound: Any) -> Any:
    """Clip's optional min or max: one value of x's dtype, or NULL when omitted."""
    if bound is None:
        return NULL
    if bound.size != 1:
        raise ShapeError(f"input {name!r} has shape {list(bound.shape)}, expected a scalar")
    if op == "Clip":
        check_same_dtype({"input": x, name: bound}, allow_bool=True)
    same_dtype(op, input=x, **{name: bound})
    return bound


@register("Clip", device="cuda")
def clip_cuda(x, low=None, high=None):
    lo, hi = _bound("Clip", x, "min", low), _bound("Clip", x, "max", high)
    y = empty(x.shape, x.dtype)
    launch(FAMILY, f"clip_{suffix(x.dtype, 'Clip', NUMERIC)}", x.size, (x, lo, hi, y))
    return (y,)


# --- gradients --------------------------------------------------------------------------------


def gradient(op: str, name: str, u: Any, dy: Any, allowed=FLOAT, a=0.0, b=0.0) -> tuple:
    """dX of `<name>_grad`(u, dY), u the forward's Y or X (as the CPU kernel reads it)."""
    dtype = same_dtype(op, u=u, dY=dy)
    if u.shape != dy.shape:
        raise ShapeError(f"{op}: dY has shape {list(dy.shape)}, expected {list(u.shape)}")
    dx = empty(dy.shape, dtype)
    tag = suffix(dtype, op, allowed)
    launch(FAMILY, f"{name}_grad_{tag}", dy.size, (u, dy, dx), np.float64(a), np.float64(b))
    return (dx,)


def _simple_gradient(op: str, name: str, allowed: Sequence[str]) -> None:
    def gradient_cuda(u, dy):
        return gradient(op, name, u, dy, allowed)

    gradient_cuda.__name__ = f"{name}_gradient_cuda"
    register(op, device="cuda")(gradient_cuda)


for _op, _name, _allowed in (
    ("SigmoidGradient", "sigmoid", FLOAT),
    ("TanhGradient", "tanh", FLOAT),
    ("SoftplusGradient", "softplus", FLOAT),
    ("SqrtGradient", "sqrt", FLOAT),
    ("ReciprocalGradient", "reciprocal", FLOAT),
    ("AbsGradient", "abs", NUMERIC),
    ("SinGradient", "sin", FLOAT),
    ("CosGradient", "cos", FLOAT),
    ("ErfGradient", "erf", FLOAT),
    ("HardSwishGradient", "hard_swish", FLOAT),
):
    _simple_gradient(_op, _name, _allowed)


@register("HardSigmoidGradient", device="cuda")
def hard_sigmoid_gradient_cuda(y, dy, alpha: float, beta: float):
    return gradient("HardSigmoidGradient", "hard_sigmoid", y, dy, a=alpha, b=beta)


@register("GeluGradient", device="cuda")
def gelu_gradient_cuda(x, dy, approximate: str):
    return gradient("GeluGradient", _gelu_name(approximate), x, dy)


def _y_or_x(op: str, y, dy, x, alpha: float, gamma: float, selu: int) -> tuple:
    dtype = same_dtype(op, Y=y, dY=dy, X=x)
    for name, v in (("dY", dy), ("X", x)):
        if v is not None and v.shape != y.shape:
            raise ShapeError(f"{op}: {name} has shape {list(v.shape)}, expected {list(y.shape)}")
    dx = empty(dy.shape, dtype)
    scalars = np.float64(alpha), np.float64(gamma), np.int32(selu)
    tag = suffix(dtype, op, FLOAT)
    launch(FAMILY, f"y_or_x_grad_{tag}", dy.size, (y, dy, NULL if x is None else x, dx), *scalars)
    return (dx,)


@register("LeakyReluGradient", device="cuda")
def leaky_relu_gradient_cuda(y, dy, x=None, *, alpha: float):
    return _y_or_x("LeakyReluGradient", y, dy, x, alpha, 1.0, 0)


@register("EluGradient", device="cuda")
def elu_gradient_cuda(y, dy, x=None, *, alpha: float):
    return _y_or_x("EluGradient", y, dy, x, alpha, 1.0, 1)


@register("SeluGradient", device="cuda")
def selu_gradient_cuda(y, dy, x=None, *, alpha: float, gamma: float):
    return _y_or_x("SeluGradient", y, dy, x, alpha, gamma, 1)


@register("ClipGradient", device="cuda")
def clip_gradient_cuda(x, dy, low=None, high=None):
    op = "ClipGradient"
    dtype = same_dtype(op, X=x, dY=dy)
    if x.shape != dy.shape:
        raise ShapeError(f"{op}: dY has shape {list(dy.shape)}, expected {list(x.shape)}")
    lo, hi = _bound(op, x, "min", low), _bound(op, x, "max", high)
    dx = empty(x.shape, dtype)
    launch(FAMILY, f"clip_grad_{suffix(dtype, op, NUMERIC)}", x.size, (x, dy, lo, hi, dx))
    return (dx,)
