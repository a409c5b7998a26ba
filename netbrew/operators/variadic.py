"""Elementwise reductions over 1..N broadcast inputs: Sum, Mean, Max and Min.

Gradients are summed back to each input's shape. Max and Min send the output gradient to
every input equal to the result, so with ties each tied input gets the full gradient (unlike
PyTorch's maximum, which splits it evenly between two tied inputs). Sum also adds
sequences (lists of arrays) element by element, as autodiff sums sequence gradients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.arithmetic_grad import reduce_each, shape_of
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

for _name, _formula, _dtypes in (
    ("Sum", "data_0 + data_1 + ...", "float"),
    ("Mean", "(data_0 + data_1 + ...) / N", "float"),
    ("Max", "max(data_0, data_1, ...)", "numeric"),
    ("Min", "min(data_0, data_1, ...)", "numeric"),
):
    schema(
        _name,
        inputs=["data_0*"],
        outputs=[_name.lower()],
        inplace={0: 0},
        dtypes=_dtypes,
        doc=f"{_name.lower()} = {_formula}, elementwise over N >= 1 inputs of one dtype, "
        "broadcast (ONNX multidirectional); output has the broadcast shape",
    )


def _fold(ufunc: np.ufunc, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    named = {f"data_{i}": a for i, a in enumerate(arrays)}
    check_same_dtype(named, allow_bool=False)
    check_broadcast(named)
    if len(arrays) == 1:
        return arrays[0].copy()
    return functools.reduce(ufunc, arrays)


@kernel("Sum")
def sum_cpu(*arrays: np.ndarray | list) -> tuple[np.ndarray | list]:
    if any(isinstance(a, list) for a in arrays):
        return (sum_sequences(arrays, sum_cpu),)
    return (_fold(np.add, arrays),)


def sum_sequences(values: tuple, add: Callable[..., tuple]) -> list:
    """Sequences (lists of arrays) summed element by element with the Sum kernel `add`
    (the CPU's or a device's): autodiff sums the partial gradients of a sequence blob with
    Sum, and a sequence's gradient is a list."""
    if not all(isinstance(v, list) for v in values):
        kinds = ", ".join("sequence" if isinstance(v, list) else "tensor" for v in values)
        raise SchemaError(f"Sum: inputs mix sequences and tensors ({kinds})")
    lengths = [len(v) for v in values]
    if len(set(lengths)) > 1:
        raise ShapeError(f"Sum: sequence inputs differ in length: {lengths}")
    return [add(*items)[0] for items in zip(*values)]


@kernel("Mean")
def mean_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    total = _fold(np.add, arrays)
    return (np.divide(total, len(arrays), out=total),)


@kernel("Max")
def max_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    return (_fold(np.maximum, arrays),)


@kernel("Min")
def min_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    return (_fold(np.minimum, arrays),)


@gradient("Sum", inplace_safe=True)
def sum_grad(op, g_out, g_in):
    """dX_i = sum_like(dY, X_i); reads only shapes."""
    return reduce_each(op, g_out, g_in)


schema(
    "MeanGradient",
    inputs=["dY", "X*"],
    outputs=["dX*"],
    onnx=False,
    output_mask=True,
    doc="dX_i = sum_like(dY, X_i) / N for the N inputs X (read for their shapes only; "
    "an omitted X_i gets no dX_i); dY's dtype",
)


@kernel("MeanGradient")
def mean_gradient_cpu(dy, *xs, output_mask) -> tuple:
    scaled = dy / len(xs)
    return tuple(
        sum_to_shape(scaled, x.shape) if want else None for x, want in zip(xs, output_mask)
    )


@gradient("Mean", inplace_safe=True)
def mean_grad(op, g_out, g_in):
    likes = [shape_of(op, i, g_out[0]) if g else "" for i, g in enumerate(g_in)]
    return [op_def("MeanGradient", [g_out[0], *likes], [g or "" for g in g_in])]


for _name in ("Max", "Min"):
    schema(
        f"{_name}Gradient",
        inputs=["Y", "dY", "X*"],
        outputs=["dX*"],
        onnx=False,
        output_mask=True,
        doc=f"dX_i = sum_like(dY * (X_i == Y), X_i), Y = {_name.lower()}(X...): every input "
        "equal to the result gets the gradient (all of them on ties); dY's dtype",
    )


@kernel("MaxGradient")
@kernel("MinGradient")
def select_gradient_cpu(y, dy, *xs, output_mask) -> tuple:
    zero = np.zeros((), dy.dtype)
    return tuple(
        sum_to_shape(np.where(x == y, dy, zero), x.shape) if want else None
        for x, want in zip(xs, output_mask)
    )


def _select_grad(op, g_out, g_in):
    """Reads the inputs' values, so Max and Min must not run in place to get a gradient."""
    xs = [x if g else "" for x, g in zip(op.input, g_in)]
    outs = [g or "" for g in g_in]
    return [op_def(f"{op.type}Gradient", [op.output[0], g_out[0], *xs], outs)]


gradient("Max")(_select_grad)
gradient("Min")(_select_grad)
