"""Gradients of the arithmetic ops, and the helpers that broadcasting gradients share.

Binary ops sum the broadcast gradient back to each input's shape with SumReduceLike. Makers
that read only shapes or outputs are `inplace_safe`: an input written in place has the
output's shape, so the output gradient stands in for it (an in-place op whose output grew
by broadcasting loses the input's shape and is not supported).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import reduce_like, tmp
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape


def shape_of(op: Any, i: int, g: str) -> str:
    """A blob with input i's shape: the input, or `g` (the output gradient) if written in place."""
    return g if op.input[i] in op.output else op.input[i]


def value_of(op: Any, i: int) -> str:
    """Input i, for a maker that reads its value; refuses it when the op overwrote it in place."""
    if op.input[i] in op.output:
        raise SchemaError(
            f"{op.type}: its gradient needs input {op.input[i]!r}, which the op overwrites in "
            "place; write the output to another blob"
        )
    return op.input[i]


def parsed_attrs(op: Any) -> dict[str, Any]:
    """The forward op's arguments with the schema's defaults filled in."""
    from netbrew.netdef.args import args_dict
    from netbrew.operators.schema import get_schema

    return get_schema(op.type).parse_attrs(args_dict(op.arg), op.type)


def in_order(g_out: list, g_in: list) -> list[int]:
    """Indices of the wanted inputs, those whose gradient overwrites an output gradient last.

    An op written in place has an input and an output gradient of the same name, so ops that
    still read the output gradient must run before it is overwritten.
    """
    wanted = [i for i, name in enumerate(g_in) if name is not None]
    return sorted(wanted, key=lambda i: g_in[i] in g_out)


def reduce_each(op: Any, g_out: list, g_in: list, negate: tuple[bool, ...] = (False, False)):
    """dX_i = +-SumReduceLike(dY, X_i) for the wanted inputs (Add, Sub, Sum)."""
    ops = []
    for i in in_order(g_out, g_in):
        ops += reduce_like(g_out[0], shape_of(op, i, g_out[0]), g_in[i])
        if i < len(negate) and negate[i]:
            ops.append(op_def("Neg", [g_in[i]], [g_in[i]]))
    return ops


@gradient("Add", inplace_safe=True)
def add_grad(op, g_out, g_in):
    return reduce_each(op, g_out, g_in)


@gradient("Sub", inplace_safe=True)
def sub_grad(op, g_out, g_in):
    return reduce_each(op, g_out, g_in, negate=(False, True))


@gradient("Mul")
def mul_grad(op, g_out, g_in):
    """dA = sum_like(dC * B, A), dB = sum_like(dC * A, B)."""
    ops = []
    for i in in_order(g_out, g_in):
        full = tmp(g_in[i], "full")
        ops.append(op_def("Mul", [g_out[0], op.input[1 - i]], [full]))
        ops += reduce_like(full, op.input[i], g_in[i])
    return ops


@gradient("Div", inplace_safe=True)
def div_grad(op, g_out, g_in):
    """dA = sum_like(dC / B, A), dB = -sum_like(dC * C / B, B); reads B and C, not A."""
    dc, b, c = g_out[0], value_of(op, 1), op.output[0]
    ops = []
    for i in in_order(g_out, g_in):
        full = tmp(g_in[i], "full")
        if i == 0:
            ops.append(op_def("Div", [dc, b], [full]))
            ops += reduce_like(full, shape_of(op, 0, dc), g_in[0])
        else:
            ops.append(op_def("Mul", [dc, c], [full]))
            ops.append(op_def("Div", [full, b], [full]))
            ops += reduce_like(full, b, g_in[1])
            ops.append(op_def("Neg", [g_in[1]], [g_in[1]]))
    return ops


schema(
    "PowGradient",
    inputs=["X", "Y", "Z", "dZ"],
    outputs=["dX", "dY"],
    onnx=False,
    output_mask=True,
    doc="dX = sum_like(dZ * Y * X^(Y-1), X) (0 where Y == 0), dY = sum_like(dZ * Z * log X, Y) "
    "(0 where X == 0 and Y >= 0, NaN where X < 0); shapes and dtypes of X and Y; "
    "an integer Y gets zeros",
)


@kernel("PowGradient")
def pow_gradient_cpu(x, y, z, dz, output_mask) -> tuple:
    dx = dy = None
    with np.errstate(all="ignore"):
        if output_mask[0]:
            g = np.where(y == 0, 0, dz * y * np.power(x, y - 1))
            dx = sum_to_shape(g, x.shape).astype(x.dtype, copy=False)
        if output_mask[1] and y.dtype.kind not in "fc":
            dy = np.zeros_like(y)
        elif output_mask[1]:
            g = np.where((x == 0) & (y >= 0), 0, dz * z * np.log(x))
            dy = sum_to_shape(g, y.shape).astype(y.dtype, copy=False)
    return dx, dy


@gradient("Pow")
def pow_grad(op, g_out, g_in):
    outs = [name or "" for name in g_in]
    return [op_def("PowGradient", [*op.input, op.output[0], g_out[0]], outs)]


@gradient("Neg", inplace_safe=True)
def neg_grad(op, g_out, g_in):
    return [op_def("Neg", [g_out[0]], [g_in[0]])]


schema(
    "AbsGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    onnx=False,
    doc="dX = dY * sign(X) (0 where X == 0); X's shape and dY's dtype",
)


@kernel("AbsGradient")
def abs_gradient_cpu(x: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    return (np.where(x > 0, dy, np.where(x < 0, -dy, np.zeros((), dy.dtype))),)


@gradient("Abs")
def abs_grad(op, g_out, g_in):
    return [op_def("AbsGradient", [op.input[0], g_out[0]], [g_in[0]])]


@gradient("Exp", inplace_safe=True)
def exp_grad(op, g_out, g_in):
    """dX = dY * Y."""
    return [op_def("Mul", [g_out[0], op.output[0]], [g_in[0]])]


@gradient("Log")
def log_grad(op, g_out, g_in):
    """dX = dY / X."""
    return [op_def("Div", [g_out[0], op.input[0]], [g_in[0]])]


schema(
    "SqrtGradient",
    inputs=["Y", "dY"],
    outputs=["dX"],
    onnx=False,
    doc="dX = dY / (2 * Y), Y = sqrt(X); same shape and dtype",
)


@kernel("SqrtGradient")
def sqrt_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (dy / (2 * y),)


@gradient("Sqrt", inplace_safe=True)
def sqrt_grad(op, g_out, g_in):
    return [op_def("SqrtGradient", [op.output[0], g_out[0]], [g_in[0]])]


schema(
    "ReciprocalGradient",
    inputs=["Y", "dY"],
    outputs=["dX"],
    onnx=False,
    doc="dX = -dY * Y^2, Y = 1 / X; same shape and dtype",
)


@kernel("ReciprocalGradient")
def reciprocal_gradient_cpu(y: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray]:
    with np.errstate(over="ignore", invalid="ignore"):
        return (-dy * y * y,)


@gradient("Reciprocal", inplace_safe=True)
def reciprocal_grad(op, g_out, g_in):
    return [op_def("ReciprocalGradient", [op.output[0], g_out[0]], [g_in[0]])]


schema(
    "ClipGradient",
    inputs=["X", "dY", "min?", "max?"],
    outputs=["dX"],
    onnx=False,
    doc="dX = dY where min <= X <= max, else 0 (min, max: optional scalars, default no "
    "bound); X's shape, dY's dtype",
)


@kernel("ClipGradient")
def clip_gradient_cpu(x, dy, low=None, high=None) -> tuple[np.ndarray]:
    inside = np.ones(x.shape, dtype=bool)
    for name, bound, fn in (("min", low, np.greater_equal), ("max", high, np.less_equal)):
        if bound is None:
            continue
        if bound.size != 1:
            raise ShapeError(f"input {name!r} has shape {list(bound.shape)}, expected a scalar")
        inside &= fn(x, bound.reshape(()))
    return (np.where(inside, dy, np.zeros((), dy.dtype)),)


@gradient("Clip")
def clip_grad(op, g_out, g_in):
    """Only the clipped input gets a gradient; the bounds get none (g_in[1:] is left unset)."""
    if g_in[0] is None:
        return []
    return [op_def("ClipGradient", [op.input[0], g_out[0], *op.input[1:]], [g_in[0]])]
