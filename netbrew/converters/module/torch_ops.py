"""from_torch converters for tensor operations, and the table of all converters.

The table maps a torch target, written as a dotted name, to one named converter:
`"torch.nn.Conv2d"` (a module class), `"torch.nn.functional.relu"` (a function),
`"Tensor.view"` (a method). Names resolve to torch objects on first use, so importing
this module does not import torch. Layers live in torch_layers.py, shapes and indexing
in torch_shapes.py.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from netbrew.converters.module.torch_graph import (
    TorchGraph,
    int64_const,
    np_dtype,
    rank_of,
)
from netbrew.errors import UnsupportedConversion
from netbrew.netdef.dtypes import type_name
from netbrew.operators.registry import Registry

Converter = Callable[[TorchGraph, Any], None]
CONVERTERS: Registry[str, Converter] = Registry("from_torch converter")
F = "torch.nn.functional"


def converts(*targets: str) -> Callable[[Converter], Converter]:
    """Registers a converter for torch targets ("torch.nn.ReLU", "torch.relu", "Tensor.relu")."""

    def register(fn: Converter) -> Converter:
        for target in targets:
            CONVERTERS.add(target, fn)
        return fn

    return register


def _resolve(path: str) -> Any:
    """The object a dotted name refers to, or None where this torch version lacks it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            return functools.reduce(getattr, parts[cut:], obj)
        except AttributeError:
            return None
    return None


@functools.cache
def _by_object() -> dict[Any, Converter]:
    from netbrew.converters.module import torch_layers, torch_shapes  # noqa: F401  (register)

    table = {}
    for key, fn in CONVERTERS.items():
        if not key.startswith("Tensor."):
            obj = _resolve(key)
            if obj is not None:
                table[obj] = fn
    return table


def lookup(g: TorchGraph, node: Any) -> Converter | None:
    """The converter of a call_module, call_function or call_method node, or None."""
    table = _by_object()
    if node.op == "call_method":
        return CONVERTERS.get(f"Tensor.{node.target}")
    if node.op == "call_module":
        for cls in type(g.module(node)).__mro__:
            if cls in table:
                return table[cls]
        return None
    try:
        return table.get(node.target)
    except TypeError:  # an unhashable target
        return None


# -- elementwise -------------------------------------------------------------------------


def _unary(op_type: str, *targets: str) -> Converter:
    def convert(g: TorchGraph, node: Any) -> None:
        g.emit(op_type, [g.blob(node.args[0])], node)

    convert.__name__ = convert.__qualname__ = f"{op_type.lower()}_converter"
    convert.__doc__ = f"{op_type}(x)."
    return converts(*targets)(convert)


_unary("Relu", "torch.nn.ReLU", "torch.relu", "torch.relu_", f"{F}.relu", f"{F}.relu_",
       "Tensor.relu", "Tensor.relu_")  # fmt: skip
_unary("Sigmoid", "torch.nn.Sigmoid", "torch.sigmoid", f"{F}.sigmoid", "Tensor.sigmoid")
_unary("Tanh", "torch.nn.Tanh", "torch.tanh", f"{F}.tanh", "Tensor.tanh")
_unary("Exp", "torch.exp", "Tensor.exp")
_unary("Log", "torch.log", "Tensor.log")
_unary("Sqrt", "torch.sqrt", "Tensor.sqrt")
_unary("Erf", "torch.erf", "Tensor.erf")
_unary("Abs", "torch.abs", "Tensor.abs", "operator.abs")
_unary("Neg", "torch.neg", "Tensor.neg", "operator.neg")
_unary("Reciprocal", "torch.reciprocal", "Tensor.reciprocal")


@converts("torch.nn.GELU", f"{F}.gelu")
def gelu(g: TorchGraph, node: Any) -> None:
    """Gelu(x, approximate='none' or 'tanh')."""
    approximate = g.arg(node, 1, "approximate", "none")
    g.emit("Gelu", [g.blob(node.args[0])], node, approximate=approximate)


@converts("torch.nn.SiLU", f"{F}.silu")
def silu(g: TorchGraph, node: Any) -> None:
    """x * Sigmoid(x)."""
    x = g.blob(node.args[0])
    g.emit("Mul", [x, g.emit("Sigmoid", [x], f"{node.name}_sigmoid")], node)


@converts("torch.nn.ELU", f"{F}.elu")
def elu(g: TorchGraph, node: Any) -> None:
    """Elu(x, alpha)."""
    g.emit("Elu", [g.blob(node.args[0])], node, alpha=float(g.arg(node, 1, "alpha", 1.0)))


@converts("torch.nn.LeakyReLU", f"{F}.leaky_relu")
def leaky_relu(g: TorchGraph, node: Any) -> None:
    """LeakyRelu(x, alpha=negative_slope)."""
    slope = float(g.arg(node, 1, "negative_slope", 0.01))
    g.emit("LeakyRelu", [g.blob(node.args[0])], node, alpha=slope)


def _clip(g: TorchGraph, node: Any, low: float, high: float) -> None:
    dtype = np_dtype(g.tensor(node.args[0]).dtype)
    bounds = [g.const(np.asarray(v, dtype), f"{node.name}_bound") for v in (low, high)]
    g.emit("Clip", [g.blob(node.args[0]), *bounds], node)


@converts("torch.nn.Hardtanh", "torch.nn.ReLU6", f"{F}.hardtanh")
def hardtanh(g: TorchGraph, node: Any) -> None:
    """Clip(x, min_val, max_val) (nn.ReLU6 is a Hardtanh from 0 to 6)."""
    _clip(g, node, g.arg(node, 1, "min_val", -1.0), g.arg(node, 2, "max_val", 1.0))


@converts(f"{F}.relu6")
def relu6(g: TorchGraph, node: Any) -> None:
    """Clip(x, 0, 6)."""
    _clip(g, node, 0.0, 6.0)


def _softmax_axis(g: TorchGraph, node: Any) -> int:
    dim = g.arg(node, 1, "dim", None)
    if dim is None:  # torch's legacy implicit dim
        dim = 0 if rank_of(g, node.args[0]) in (0, 1, 3) else 1
    return int(dim)


@converts("torch.nn.Softmax", "torch.softmax", f"{F}.softmax", "Tensor.softmax")
def softmax(g: TorchGraph, node: Any) -> None:
    """Softmax(x, axis=dim)."""
    g.emit("Softmax", [g.blob(node.args[0])], node, axis=_softmax_axis(g, node))


@converts("torch.nn.LogSoftmax", "torch.log_softmax", f"{F}.log_softmax", "Tensor.log_softmax")
def log_softmax(g: TorchGraph, node: Any) -> None:
    """LogSoftmax(x, axis=dim)."""
    g.emit("LogSoftmax", [g.blob(node.args[0])], node, axis=_softmax_axis(g, node))


def emit_binary(g: TorchGraph, node: Any, op_type: str, a: Any, b: Any) -> None:
    """A broadcasting binary op; operands are cast to torch's promoted dtype (int / int is
    float in torch, ONNX would truncate) and numbers become Constants of that dtype."""
    out_dtype = np_dtype(g.torch.result_type(*(g.value(v) for v in (a, b))))
    if op_type == "Div" and out_dtype.kind in "iub":
        out_dtype = np_dtype(g.values[node].dtype)
    blobs = []
    for arg in (a, b):
        if g.is_node(arg) and arg in g.blobs:
            blob = g.blob(arg)
            if np_dtype(g.tensor(arg).dtype) != out_dtype:
                blob = g.emit("Cast", [blob], f"{node.name}_cast", to=type_name(out_dtype))
        else:
            blob = g.const(np.asarray(g.value(arg)).astype(out_dtype), f"{node.name}_const")
        blobs.append(blob)
    g.emit(op_type, blobs, node)


def _binary(op_type: str, *targets: str) -> Converter:
    def convert(g: TorchGraph, node: Any) -> None:
        a, b = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs["other"]
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            raise UnsupportedConversion(f"alpha={alpha}; multiply the operand instead")
        if node.kwargs.get("rounding_mode") is not None:
            raise UnsupportedConversion(f"rounding_mode={node.kwargs['rounding_mode']!r}")
        emit_binary(g, node, op_type, a, b)

    convert.__name__ = convert.__qualname__ = f"{op_type.lower()}_converter"
    convert.__doc__ = f"{op_type}(a, b) with torch's type promotion."
    return converts(*targets)(convert)


_binary("Add", "operator.add", "operator.iadd", "torch.add", "Tensor.add", "Tensor.add_")
_binary("Sub", "operator.sub", "operator.isub", "torch.sub", "Tensor.sub", "Tensor.sub_")
_binary("Mul", "operator.mul", "operator.imul", "torch.mul", "Tensor.mul", "Tensor.mul_")
_binary("Div", "operator.truediv", "operator.itruediv", "torch.div", "Tensor.div", "Tensor.div_")
_binary("Pow", "operator.pow", "torch.pow", "Tensor.pow")
_binary("Greater", "operator.gt", "torch.gt", "Tensor.gt")
_binary("Less", "operator.lt", "torch.lt", "Tensor.lt")
_binary("Equal", "operator.eq", "torch.eq", "Tensor.eq")
_binary("MatMul", "operator.matmul", "torch.matmul", "torch.bmm", "Tensor.matmul", "Tensor.bmm")


# -- reductions --------------------------------------------------------------------------


def _reduce(op_type: str, *targets: str) -> Converter:
    def convert(g: TorchGraph, node: Any) -> None:
        dim = g.arg(node, 1, "dim", None)
        keepdim = int(bool(g.arg(node, 2, "keepdim", False)))
        if dim is None or dim == []:
            return g.emit(op_type, [g.blob(node.args[0])], node, keepdims=keepdim)
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        axes = int64_const(g, node, [int(d) for d in dims], "axes")
        g.emit(op_type, [g.blob(node.args[0]), axes], node, keepdims=keepdim)

    convert.__name__ = convert.__qualname__ = f"{op_type.lower()}_converter"
    convert.__doc__ = f"{op_type}(x, axes=dim, keepdims=keepdim)."
    return converts(*targets)(convert)


_reduce("ReduceMean", "torch.mean", "Tensor.mean")
_reduce("ReduceSum", "torch.sum", "Tensor.sum")


@converts("torch.argmax", "Tensor.argmax")
def argmax(g: TorchGraph, node: Any) -> None:
    """ArgMax(x, axis=dim, keepdims); over the flattened x when dim is None."""
    dim = g.arg(node, 1, "dim", None)
    keepdim = int(bool(g.arg(node, 2, "keepdim", False)))
    x = g.blob(node.args[0])
    if dim is None:
        flat = int64_const(g, node, [-1], "shape")
        x, dim, keepdim = g.emit("Reshape", [x, flat], f"{node.name}_flat"), 0, 0
    g.emit("ArgMax", [x], node, axis=int(dim), keepdims=keepdim)
