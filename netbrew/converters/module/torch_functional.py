"""netbrew ops as torch calls, with ONNX semantics: the functional steps of to_torch.

One named function per op type, `fn(torch, inputs, attrs) -> tuple of tensors`. `inputs`
holds tensors (None for an omitted optional input); `attrs` holds the op's parsed arguments
with their defaults, plus `_op` (the op type) and `_outputs` (its output count). A function
raises NumpyFallback for a configuration it does not cover (an Indices output, asymmetric
pads with count_include_pad=0); to_torch then runs netbrew's own NumPy kernel, which
autograd cannot differentiate through.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from netbrew.operators.registry import Registry

TorchOp = Callable[[Any, list, dict], tuple]
TORCH_OPS: Registry[str, TorchOp] = Registry("torch implementation of a netbrew op")


class NumpyFallback(Exception):
    """This configuration of the op has no torch implementation here."""


def implements(*op_types: str) -> Callable[[TorchOp], TorchOp]:
    def register(fn: TorchOp) -> TorchOp:
        for op_type in op_types:
            TORCH_OPS.add(op_type, fn)
        return fn

    return register


def _elementwise(op_type: str, name: str) -> None:
    def run(torch, inputs, attrs):
        return (getattr(torch, name)(inputs[0]),)

    run.__name__ = run.__qualname__ = f"{op_type.lower()}_torch"
    TORCH_OPS.add(op_type, run)


for _op, _name in {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Erf": "erf", "Abs": "abs", "Neg": "neg", "Reciprocal": "reciprocal",
    "Floor": "floor", "Ceil": "ceil",
}.items():  # fmt: skip
    _elementwise(_op, _name)


@implements("Identity", "StopGradient")
def identity_torch(torch, inputs, attrs):
    return (inputs[0],)


@implements("Gelu")
def gelu_torch(torch, inputs, attrs):
    return (torch.nn.functional.gelu(inputs[0], approximate=attrs["approximate"]),)


@implements("LeakyRelu")
def leaky_relu_torch(torch, inputs, attrs):
    return (torch.nn.functional.leaky_relu(inputs[0], attrs["alpha"]),)


@implements("Elu")
def elu_torch(torch, inputs, attrs):
    return (torch.nn.functional.elu(inputs[0], attrs["alpha"]),)


@implements("Softmax", "LogSoftmax")
def softmax_torch(torch, inputs, attrs):
    fn = torch.log_softmax if attrs["_op"] == "LogSoftmax" else torch.softmax
    return (fn(inputs[0], attrs["axis"]),)


@implements("Clip")
def clip_torch(torch, inputs, attrs):
    x, low, high = (inputs + [None, None])[:3]
    if low is None and high is None:  # ONNX: no bounds is the identity
        return (x,)
    return (torch.clamp(x, low, high),)


@implements("Add", "Sub", "Mul", "Div", "Pow")
def binary_torch(torch, inputs, attrs):
    a, b = inputs
    op = attrs["_op"]
    if op == "Div" and not a.dtype.is_floating_point:
        return (torch.div(a, b, rounding_mode="trunc"),)
    if op == "Pow":
        return (torch.pow(a, b).to(a.dtype),)
    return ({"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}[op](a, b),)


@implements("Sum", "Mean", "Max", "Min")
def variadic_torch(torch, inputs, attrs):
    """ONNX's n-ary elementwise ops (ResNet's residual Sum), every input broadcast."""
    op = attrs["_op"]
    step = {"Sum": torch.add, "Mean": torch.add, "Max": torch.maximum, "Min": torch.minimum}[op]
    y = inputs[0]
    for x in inputs[1:]:
        y = step(y, x)
    return (y / len(inputs) if op == "Mean" else y,)


@implements("MatMul")
def matmul_torch(torch, inputs, attrs):
    return (torch.matmul(*inputs),)


@implements("Gemm")
def gemm_torch(torch, inputs, attrs):
    a, b, c = (inputs + [None])[:3]
    a = a.t() if attrs["transA"] else a
    b = b.t() if attrs["transB"] else b
    y = attrs["alpha"] * (a @ b) if attrs["alpha"] != 1.0 else a @ b
    return (y if c is None else y + attrs["beta"] * c,)


@implements("FC")
def fc_torch(torch, inputs, attrs):
    x, w, b = inputs
    axis, axis_w = attrs["axis"], attrs["axis_w"]
    lead = x.shape[:axis]
    w2 = w.reshape(math.prod(w.shape[:axis_w]), -1)
    y = torch.nn.functional.linear(x.reshape(math.prod(lead), -1), w2, b)
    return (y.reshape(*lead, w2.shape[0]),)


# -- windows -----------------------------------------------------------------------------


def resolve_pads(attrs: dict, spatial: tuple, kernel: list) -> list[int]:
    """ONNX pads [begins..., ends...], with auto_pad SAME_UPPER/SAME_LOWER/VALID resolved."""
    n = len(kernel)
    strides = attrs.get("strides") or [1] * n
    dilations = attrs.get("dilations") or [1] * n
    mode = attrs.get("auto_pad", "NOTSET")
    if mode in ("NOTSET", ""):
        return list(attrs.get("pads") or [0] * 2 * n)
    if mode == "VALID":
        return [0] * 2 * n
    begins, ends = [], []
    for d, k, s, dil in zip(spatial, kernel, strides, dilations):
        total = max((math.ceil(d / s) - 1) * s + (k - 1) * dil + 1 - d, 0)
        small = total // 2
        begins.append(small if mode == "SAME_UPPER" else total - small)
        ends.append(total - begins[-1])
    return begins + ends


def _pad_first(torch, x, pads: list[int], value: float):
    """(x padded by the asymmetric part of pads, the symmetric padding left for the op)."""
    n = len(pads) // 2
    begins, ends = pads[:n], pads[n:]
    sym = [min(b, e) for b, e in zip(begins, ends)]
    extra = []
    for b, e, s in reversed(list(zip(begins, ends, sym))):
        extra += [b - s, e - s]
    if any(extra):
        x = torch.nn.functional.pad(x, extra, value=value)
    return x, sym


@implements("Conv")
def conv_torch(torch, inputs, attrs):
    x, w, b = (inputs + [None])[:3]
    n = w.dim() - 2
    x, padding = _pad_first(torch, x, resolve_pads(attrs, x.shape[2:], list(w.shape[2:])), 0.0)
    conv = getattr(torch.nn.functional, f"conv{n}d")
    strides = attrs["strides"] or [1] * n
    dilations = attrs["dilations"] or [1] * n
    return (conv(x, w, b, strides, padding, dilations, attrs["group"]),)


@implements("ConvTranspose")
def conv_transpose_torch(torch, inputs, attrs):
    x, w, b = (inputs + [None])[:3]
    n = w.dim() - 2
    pads = list(attrs["pads"] or [0] * 2 * n)
    if attrs["output_shape"] or attrs["auto_pad"] not in ("NOTSET", "") or pads[:n] != pads[n:]:
        raise NumpyFallback("output_shape, auto_pad or asymmetric pads")
    conv = getattr(torch.nn.functional, f"conv_transpose{n}d")
    return (
        conv(
            x, w, b, attrs["strides"] or [1] * n, pads[:n],
            attrs["output_padding"] or [0] * n, attrs["group"], attrs["dilations"] or [1] * n,
        ),
    )  # fmt: skip


@implements("MaxPool")
def max_pool_torch(torch, inputs, attrs):
    if attrs.get("_outputs", 1) > 1 or attrs["storage_order"]:
        raise NumpyFallback("Indices output")
    x = inputs[0]
    kernel = attrs["kernel_shape"]
    n = len(kernel)
    x, padding = _pad_first(torch, x, resolve_pads(attrs, x.shape[2:], kernel), -math.inf)
    pool = getattr(torch.nn.functional, f"max_pool{n}d")
    strides, dilations = attrs["strides"] or [1] * n, attrs["dilations"] or [1] * n
    return (pool(x, kernel, strides, padding, dilations, ceil_mode=bool(attrs["ceil_mode"])),)


@implements("AveragePool")
def avg_pool_torch(torch, inputs, attrs):
    x = inputs[0]
    kernel = attrs["kernel_shape"]
    n = len(kernel)
    if attrs["dilations"] and any(d != 1 for d in attrs["dilations"]):
        raise NumpyFallback("dilations")
    pads = resolve_pads(attrs, x.shape[2:], kernel)
    include = bool(attrs["count_include_pad"])
    if pads[:n] != pads[n:] and not include:
        raise NumpyFallback("asymmetric pads without count_include_pad")
    x, padding = _pad_first(torch, x, pads, 0.0)
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise NumpyFallback("pads wider than half the kernel")
    pool = getattr(torch.nn.functional, f"avg_pool{n}d")
    strides = attrs["strides"] or [1] * n
    return (pool(x, kernel, strides, padding, bool(attrs["ceil_mode"]), include),)


@implements("GlobalAveragePool")
def global_avg_pool_torch(torch, inputs, attrs):
    x = inputs[0]
    return (x.mean(dim=tuple(range(2, x.dim())), keepdim=True),)


@implements("GlobalMaxPool")
def global_max_pool_torch(torch, inputs, attrs):
    x = inputs[0]
    return (x.amax(dim=tuple(range(2, x.dim())), keepdim=True),)


# -- normalization -----------------------------------------------------------------------


@implements("BatchNormalization")
def batch_norm_torch(torch, inputs, attrs):
    if attrs["training_mode"] or attrs.get("_outputs", 1) > 1:
        raise NumpyFallback("training_mode")
    x, scale, b, mean, var = inputs
    return (torch.nn.functional.batch_norm(x, mean, var, scale, b, False, 0.0, attrs["epsilon"]),)


@implements("LayerNormalization")
def layer_norm_torch(torch, inputs, attrs):
    if attrs.get("_outputs", 1) > 1:
        raise NumpyFallback("Mean and InvStdDev outputs")
    x, scale, b = (inputs + [None])[:3]
    shape = tuple(x.shape[attrs["axis"] % x.dim() :])
    scale = scale.expand(shape)
    b = None if b is None else b.expand(shape)
    return (torch.nn.functional.layer_norm(x, shape, scale, b, attrs["epsilon"]),)


@implements("Dropout")
def dropout_torch(torch, inputs, attrs):
    if attrs.get("_outputs", 1) > 1:
        raise NumpyFallback("mask output")
    x, ratio, training = (inputs + [None, None])[:3]
    if training is None or not bool(training):
        return (x,)
    return (torch.nn.functional.dropout(x, 0.5 if ratio is None else float(ratio), True),)


# -- shapes ------------------------------------------------------------------------------


@implements("Flatten")
def flatten_torch(torch, inputs, attrs):
    x = inputs[0]
    axis = attrs["axis"] + x.dim() if attrs["axis"] < 0 else attrs["axis"]
    return (x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])),)


@implements("Reshape")
def reshape_torch(torch, inputs, attrs):
    x, shape = inputs
    dims = [int(d) for d in shape.tolist()]
    if not attrs["allowzero"]:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return (x.reshape(dims),)


@implements("Transpose")
def transpose_torch(torch, inputs, attrs):
    x = inputs[0]
    perm = attrs["perm"] or list(reversed(range(x.dim())))
    return (x.permute(*perm),)


@implements("Concat")
def concat_torch(torch, inputs, attrs):
    return (torch.cat([t for t in inputs if t is not None], dim=attrs["axis"]),)


@implements("Split")
def split_torch(torch, inputs, attrs):
    x, sizes = (inputs + [None])[:2]
    axis = attrs["axis"]
    if sizes is not None:
        return tuple(torch.split(x, [int(s) for s in sizes.tolist()], dim=axis))
    n = attrs["num_outputs"] or attrs["_outputs"]
    pieces = torch.split(x, math.ceil(x.shape[axis] / n), dim=axis)
    if len(pieces) != n:
        raise NumpyFallback("uneven split")
    return tuple(pieces)


@implements("Shape")
def shape_torch(torch, inputs, attrs):
    dims = inputs[0].shape[attrs["start"] : attrs["end"]]
    return (torch.tensor(list(dims), dtype=torch.int64, device=inputs[0].device),)


@implements("Gather")
def gather_torch(torch, inputs, attrs):
    data, indices = inputs
    axis = attrs["axis"] % data.dim()
    idx = torch.where(indices < 0, indices + data.shape[axis], indices).long()
    out = torch.index_select(data, axis, idx.reshape(-1))
    return (out.reshape(*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :]),)


@implements("Unsqueeze")
def unsqueeze_torch(torch, inputs, attrs):
    x, axes = inputs
    rank = x.dim() + axes.numel()
    for a in sorted(int(a) % rank for a in axes.tolist()):
        x = x.unsqueeze(a)
    return (x,)


@implements("Squeeze")
def squeeze_torch(torch, inputs, attrs):
    x, axes = (inputs + [None])[:2]
    if axes is None:
        return (x.squeeze(),)
    for a in sorted((int(a) % x.dim() for a in axes.tolist()), reverse=True):
        x = x.squeeze(a)
    return (x,)


@implements("Slice")
def slice_torch(torch, inputs, attrs):
    x, starts, ends, axes, steps = (inputs + [None, None])[:5]
    index = [slice(None)] * x.dim()
    axes = range(len(starts)) if axes is None else axes.tolist()
    steps = [1] * len(starts) if steps is None else steps.tolist()
    for a, s, e, st in zip(axes, starts.tolist(), ends.tolist(), steps):
        if st <= 0:
            raise NumpyFallback("a negative step")
        index[a] = slice(s, e, st)
    return (x[tuple(index)],)


@implements("Expand")
def expand_torch(torch, inputs, attrs):
    x, shape = inputs
    return (x.expand(torch.broadcast_shapes(x.shape, tuple(shape.tolist()))),)


@implements("ReduceMean", "ReduceSum", "ReduceMax")
def reduce_torch(torch, inputs, attrs):
    x, axes = (inputs + [None])[:2]
    dims = [] if axes is None else [int(a) for a in axes.tolist()]
    if not dims and attrs["noop_with_empty_axes"]:
        return (x,)
    dims = dims or list(range(x.dim()))
    fn = {"ReduceMean": torch.mean, "ReduceSum": torch.sum, "ReduceMax": torch.amax}[attrs["_op"]]
    return (fn(x, dim=dims, keepdim=bool(attrs["keepdims"])),)


@implements("ArgMax")
def argmax_torch(torch, inputs, attrs):
    if attrs["select_last_index"]:
        raise NumpyFallback("select_last_index")
    return (torch.argmax(inputs[0], dim=attrs["axis"], keepdim=bool(attrs["keepdims"])),)


@implements("Cast")
def cast_torch(torch, inputs, attrs):
    from netbrew.operators.constant import onnx_dtype

    try:
        dtype = torch.from_numpy(np.empty(0, onnx_dtype(attrs["to"]))).dtype
    except TypeError:
        raise NumpyFallback(f"Cast to {attrs['to']}") from None
    return (inputs[0].to(dtype),)
