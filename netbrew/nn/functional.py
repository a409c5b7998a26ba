"""Functions with torch.nn.functional's names and signatures, run through the operator registry.

Each function issues registry ops through `netbrew.nn._dispatch.call`: on NumPy arrays it
returns NumPy arrays, and under tracing the same call records OperatorDefs. Where an op's
convention differs from PyTorch's, the function converts (BatchNormalization's momentum is
1 - PyTorch's; its running variance is made unbiased, as PyTorch keeps it).

    >>> import netbrew.nn.functional as F
    >>> F.relu(np.array([-1.0, 2.0], np.float32))
    array([0., 2.], dtype=float32)
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.nn import _ops
from netbrew.nn._dispatch import assign_, call, constant
from netbrew.nn._ops import binary, cast, const

__all__ = [
    "abs",
    "adaptive_avg_pool2d",
    "add",
    "argmax",
    "avg_pool2d",
    "batch_norm",
    "cast",
    "cat",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cross_entropy",
    "div",
    "dropout",
    "embedding",
    "exp",
    "flatten",
    "full",
    "gelu",
    "layer_norm",
    "linear",
    "log",
    "log_softmax",
    "matmul",
    "max",
    "max_pool2d",
    "mean",
    "mul",
    "ones",
    "permute",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "sqrt",
    "stack",
    "sub",
    "sum",
    "tanh",
    "transpose",
    "where",
    "zeros",
]


def ntuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """An int repeated n times, or a sequence of n ints."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError(f"{name} must be an int or {n} ints, got {list(value)}")
    return value


def _check_rank(x: Any, ranks: Sequence[int], what: str, layout: str) -> None:
    if x.ndim not in ranks:
        want = " or ".join(f"{r}-D" for r in ranks)
        raise ValueError(f"{what}: expected {want} input {layout}, got {x.ndim}-D {list(x.shape)}")


# -- linear and convolution ------------------------------------------------------------------


def linear(input: Any, weight: Any, bias: Any = None) -> Any:
    """y = x W^T + b over the last dim: Gemm(transB=1) for 2-D x, else MatMul + Add."""
    if input.ndim == 2:
        return call("Gemm", [input, weight, bias], transB=1)
    y = call("MatMul", [input, call("Transpose", [weight], perm=(1, 0))])
    return y if bias is None else call("Add", [y, bias])


def _conv_pads(padding: Any, kernel: Sequence[int], dilation: Sequence[int], stride) -> tuple:
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * 2 * n
        if padding != "same":
            raise ValueError(f"padding {padding!r} is not supported; use 'valid', 'same' or ints")
        if any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple(t // 2 for t in total) + tuple(t - t // 2 for t in total)
    return ntuple(padding, n, "padding") * 2


def _conv(input, weight, bias, stride, padding, dilation, groups, n: int) -> Any:
    _check_rank(input, [n + 2], f"conv{n}d", "(N, C, " + ", ".join("DHW"[3 - n :]) + ")")
    kernel = tuple(weight.shape[2:])
    stride = ntuple(stride, n, "stride")
    dilation = ntuple(dilation, n, "dilation")
    pads = _conv_pads(padding, kernel, dilation, stride)
    return call(
        "Conv",
        [input, weight, bias],
        kernel_shape=kernel,
        strides=stride,
        pads=pads,
        dilations=dilation,
        group=groups,
    )


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Any:
    """1-D convolution (cross-correlation) of (N, C, L); padding may be 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Any:
    """2-D convolution (cross-correlation) of (N, C, H, W); padding may be 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Any:
    """3-D convolution (cross-correlation) of (N, C, D, H, W)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3)


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, n):
    _check_rank(input, [n + 2], f"conv_transpose{n}d", "(N, C, " + ", ".join("DHW"[3 - n :]) + ")")
    return call(
        "ConvTranspose",
        [input, weight, bias],
        kernel_shape=tuple(weight.shape[2:]),
        strides=ntuple(stride, n, "stride"),
        pads=ntuple(padding, n, "padding") * 2,
        output_padding=ntuple(output_padding, n, "output_padding"),
        dilations=ntuple(dilation, n, "dilation"),
        group=groups,
    )


def conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Any:
    """Transposed 1-D convolution; weight is (C_in, C_out / groups, k)."""
    args = (stride, padding, output_padding, groups, dilation)
    return _conv_transpose(input, weight, bias, *args, 1)


def conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Any:
    """Transposed 2-D convolution; weight is (C_in, C_out / groups, kH, kW)."""
    args = (stride, padding, output_padding, groups, dilation)
    return _conv_transpose(input, weight, bias, *args, 2)


def conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
) -> Any:
    """Transposed 3-D convolution; weight is (C_in, C_out / groups, kD, kH, kW)."""
    args = (stride, padding, output_padding, groups, dilation)
    return _conv_transpose(input, weight, bias, *args, 3)


# -- normalization ---------------------------------------------------------------------------


def batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Batch normalization over dim 1 (BatchNormalization).

    In training the batch's statistics normalise, and the running statistics (if given)
    are updated in place as PyTorch does: running = (1 - momentum) * running + momentum *
    batch, with the unbiased batch variance. Without running statistics, batch statistics
    are used in every mode.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input (N, C, ...), got {input.ndim}-D")
    c, dtype = input.shape[1], input.dtype
    scale = weight if weight is not None else np.ones(c, dtype)
    shift = bias if bias is not None else np.zeros(c, dtype)
    tracked = running_mean is not None and running_var is not None
    if not tracked:
        training = True
    args = {"epsilon": eps, "momentum": 1.0 - momentum}
    if not training:
        stats = [running_mean, running_var]
        return call("BatchNormalization", [input, scale, shift, *stats], training_mode=0, **args)
    n = math.prod(input.shape) // c
    if n <= 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size "
            f"{list(input.shape)}"
        )
    if not tracked:
        stats = [np.zeros(c, dtype), np.ones(c, dtype)]
        return call("BatchNormalization", [input, scale, shift, *stats], training_mode=1, **args)
    y, new_mean, biased_var = call(
        "BatchNormalization",
        [input, scale, shift, running_mean, running_var],
        outputs=3,
        training_mode=1,
        **args,
    )
    # biased_var = (1 - m) * running + m * var_b; PyTorch keeps m * var_b * n / (n - 1)
    correction = constant(np.asarray(n / (n - 1), dtype), "var_correction")
    decay = constant(np.asarray((1.0 - momentum) / (n - 1), dtype), "var_decay")
    unbiased = sub(mul(biased_var, correction), mul(running_var, decay))
    assign_(running_mean, new_mean)
    assign_(running_var, unbiased)
    return y


def layer_norm(
    input: Any, normalized_shape: Sequence[int], weight: Any = None, bias: Any = None, eps=1e-5
) -> Any:
    """Normalizes over the trailing dims `normalized_shape` (LayerNormalization)."""
    shape = ntuple(normalized_shape, len(normalized_shape), "normalized_shape")
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise ValueError(
            f"layer_norm: normalized_shape={list(shape)} does not match the trailing dims of "
            f"input {list(input.shape)}"
        )
    scale = weight if weight is not None else np.ones(shape, input.dtype)
    return call("LayerNormalization", [input, scale, bias], axis=-len(shape), epsilon=eps)


# -- activations -----------------------------------------------------------------------------


def relu(input: Any, inplace: bool = False) -> Any:
    return call("Relu", [input])


def gelu(input: Any, approximate: str = "none") -> Any:
    """GELU, exact (erf) or approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return call("Gelu", [input], approximate=approximate)


def sigmoid(input: Any) -> Any:
    return call("Sigmoid", [input])


def tanh(input: Any) -> Any:
    return call("Tanh", [input])


def _softmax_dim(dim: int | None, ndim: int) -> int:
    """PyTorch's legacy choice when dim is None: 0 for 0-, 1- and 3-D input, else 1."""
    if dim is not None:
        return dim
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:
    x = input if dtype is None else cast(input, dtype)
    return call("Softmax", [x], axis=_softmax_dim(dim, input.ndim))


def log_softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:
    x = input if dtype is None else cast(input, dtype)
    return call("LogSoftmax", [x], axis=_softmax_dim(dim, input.ndim))


# -- pooling ---------------------------------------------------------------------------------


def _pool_args(kernel_size, stride, padding, dilation=1) -> dict[str, Any]:
    kernel = ntuple(kernel_size, 2, "kernel_size")
    stride = kernel if stride is None or stride == () or stride == [] else stride
    pads = ntuple(padding, 2, "padding")
    if any(p > k // 2 for p, k in zip(pads, kernel)):
        raise ValueError(
            f"pad should be at most half of effective kernel size, but got pad={list(pads)}, "
            f"kernel_size={list(kernel)}"
        )
    return {
        "kernel_shape": kernel,
        "strides": ntuple(stride, 2, "stride"),
        "pads": pads * 2,
        "dilations": ntuple(dilation, 2, "dilation"),
    }


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
) -> Any:
    """Max over 2-D windows of (N, C, H, W) (MaxPool)."""
    if return_indices:
        raise NotImplementedError(
            "max_pool2d: return_indices=True is not supported (MaxPool's Indices index the "
            "whole tensor, not each plane as PyTorch's do)"
        )
    _check_rank(input, [4], "max_pool2d", "(N, C, H, W)")
    args = _pool_args(kernel_size, stride, padding, dilation)
    return call("MaxPool", [input], ceil_mode=int(ceil_mode), **args)


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
) -> Any:
    """Mean over 2-D windows of (N, C, H, W) (AveragePool)."""
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d: divisor_override is not supported")
    _check_rank(input, [4], "avg_pool2d", "(N, C, H, W)")
    args = _pool_args(kernel_size, stride, padding)
    del args["dilations"]
    return call(
        "AveragePool",
        [input],
        ceil_mode=int(ceil_mode),
        count_include_pad=int(count_include_pad),
        **args,
    )


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:
    """Mean pooling to `output_size` (an int, or (H, W) where None keeps the input's size).

    Output 1 (or (1, 1)) is GlobalAveragePool. Other sizes that divide the input evenly are
    AveragePool with kernel = stride = input / output, which is what adaptive pooling
    computes then; uneven sizes raise ValueError.
    """
    _check_rank(input, [4], "adaptive_avg_pool2d", "(N, C, H, W)")
    size = (output_size, output_size) if not isinstance(output_size, (tuple, list)) else output_size
    if len(size) != 2:
        raise ValueError(f"adaptive_avg_pool2d: output_size must be 1 or 2 values, got {size}")
    in_hw = input.shape[2:]
    out = tuple(i if o is None else int(o) for i, o in zip(in_hw, size))
    if out == (1, 1):
        return call("GlobalAveragePool", [input])
    if any(o <= 0 or i % o for i, o in zip(in_hw, out)):
        raise ValueError(
            f"adaptive_avg_pool2d: output_size {list(out)} is supported only when it divides "
            f"the input size {list(in_hw)} evenly (or is 1); uneven adaptive windows have no "
            "registry op"
        )
    kernel = tuple(i // o for i, o in zip(in_hw, out))
    if kernel == (1, 1):
        return call("Identity", [input])
    return call("AveragePool", [input], kernel_shape=kernel, strides=kernel)


# -- regularization, embedding, shapes -------------------------------------------------------


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p) in training;
    Dropout in inference mode (the identity) otherwise."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return call("Dropout", [input])
    if p == 1.0:  # everything dropped; Dropout's ratio must stay below 1
        return mul(input, 0.0)
    ratio = constant(np.asarray(p, np.float32), "ratio")
    mode = constant(np.asarray(True), "training_mode")
    return call("Dropout", [input, ratio, mode], outputs=2)[0]


def embedding(input: Any, weight: Any, padding_idx: int | None = None) -> Any:
    """Rows of `weight` picked by the integer `input` (Gather on axis 0)."""
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: indices must be integers, got dtype {input.dtype}")
    return call("Gather", [weight, input], axis=0)


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    """Merges dims start_dim..end_dim into one (Flatten for dims 1.., else Reshape)."""
    ndim = builtins.max(input.ndim, 1)
    start, end = start_dim % ndim, end_dim % ndim
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == 1 and end == ndim - 1:
        return call("Flatten", [input], axis=1)
    # leading dims copied (0) so the batch size stays free; trailing ones as traced
    shape = [0] * start + [-1] + [int(d) for d in input.shape[end + 1 :]]
    return call("Reshape", [input, const(shape)])


def reshape(input: Any, shape: Sequence[int]) -> Any:
    return _ops.reshape(input, tuple(shape))


def transpose(input: Any, dim0: int, dim1: int) -> Any:
    """Swaps two dims (PyTorch's transpose)."""
    perm = list(range(input.ndim))
    perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
    return call("Transpose", [input], perm=tuple(perm))


def permute(input: Any, dims: Sequence[int]) -> Any:
    return _ops.permute(input, tuple(dims))


def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Concatenates along `dim` (Concat); operands are promoted to one dtype."""
    return call("Concat", _ops.promote(*tensors), axis=dim)


def matmul(input: Any, other: Any) -> Any:
    return binary("MatMul", input, other)


def add(input: Any, other: Any) -> Any:
    return binary("Add", input, other)


def sub(input: Any, other: Any) -> Any:
    return binary("Sub", input, other)


def mul(input: Any, other: Any) -> Any:
    return binary("Mul", input, other)


def div(input: Any, other: Any) -> Any:
    """True division (integers divide as float64), as torch.div."""
    return _ops.true_divide(input, other)


def exp(input: Any) -> Any:
    return call("Exp", [input])


def log(input: Any) -> Any:
    return call("Log", [input])


def sqrt(input: Any) -> Any:
    return call("Sqrt", [input])


def abs(input: Any) -> Any:  # noqa: A001 - PyTorch's name
    return call("Abs", [input])


# -- losses ----------------------------------------------------------------------------------


def cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    """Softmax cross-entropy of logits (N, C, ...) against class indices (N, ...).

    One SoftmaxCrossEntropyLoss op; reduction 'mean' divides by the summed weights of the
    targets that are not ignore_index, as PyTorch does.
    """
    if label_smoothing:
        raise NotImplementedError("cross_entropy: label_smoothing is not supported")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(
            f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}"
        )
    if target.dtype.kind not in "iu":
        raise NotImplementedError(
            f"cross_entropy: targets must be class indices (integers), got dtype {target.dtype}; "
            "class probabilities are not supported"
        )
    return call(
        "SoftmaxCrossEntropyLoss",
        [input, target, weight],
        ignore_index=ignore_index,
        reduction=reduction,
    )


# -- reductions, selection and factories (what scripted control flow needs) -----------------


def sum(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001 - torch's name
    """Sum over `dim` (an int, a sequence of ints, or None: every dim) (ReduceSum)."""
    return _ops.reduce("ReduceSum", input, dim, keepdim)


def mean(input: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """Mean over `dim` (an int, a sequence of ints, or None: every dim) (ReduceMean)."""
    return _ops.reduce("ReduceMean", input, dim, keepdim)


def max(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A001 - torch's name
    """torch.max: the largest element (dim None); (values, indices) along an int `dim`
    (ReduceMax and ArgMax); or the elementwise maximum when `dim` is a tensor (Max)."""
    if dim is None:
        return _ops.reduce("ReduceMax", input, None, keepdim)
    if not isinstance(dim, (int, np.integer)):
        return binary("Max", input, dim)
    values = _ops.reduce("ReduceMax", input, int(dim), keepdim)
    return values, _ops.argmax(input, int(dim), keepdim)


def argmax(input: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    """Index of the largest element along `dim` (int64; the flat index when dim is None)."""
    return _ops.argmax(input, dim, keepdim)


def where(condition: Any, input: Any, other: Any) -> Any:
    """input where condition else other (Where); numbers take the other operand's dtype."""
    if _ops.is_scalar(condition):
        condition = np.asarray(condition)
    if condition.dtype != np.bool_:
        condition = cast(condition, np.bool_)
    x, y = _ops.promote(input, other)
    return call("Where", [condition, x, y])


def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    """Joins equally shaped tensors along a new dim (Unsqueeze each, then Concat)."""
    tensors = _ops.promote(*tensors)
    if not tensors:
        raise ValueError("stack expects a non-empty sequence of tensors")
    axis = dim if dim >= 0 else dim + tensors[0].ndim + 1
    axes = const([axis])
    return call("Concat", [call("Unsqueeze", [t, axes]) for t in tensors], axis=axis)


def _shape_operand(size: tuple) -> Any:
    """A shape given as ints, a sequence of ints, or int tensors (script's x.shape[0])."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if all(isinstance(d, (int, np.integer)) for d in size):
        return const([int(d) for d in size])
    one = const([1])
    dims = [const([int(d)]) if _ops.is_scalar(d) else call("Reshape", [cast(d, np.int64), one])
            for d in size]  # fmt: skip
    return dims[0] if len(dims) == 1 else call("Concat", dims, axis=0)


def full(size: Any, fill_value: Any, dtype: Any = None) -> Any:
    """A tensor of shape `size` filled with `fill_value` (ConstantOfShape); the dtype is
    float32 for floats, int64 for ints and bool for bools unless `dtype` is given."""
    if dtype is None:
        dtype = np.bool_ if isinstance(fill_value, bool) else (
            np.int64 if isinstance(fill_value, (int, np.integer)) else np.float32
        )  # fmt: skip
    value = np.array([fill_value], dtype=dtype)
    size = size if isinstance(size, (tuple, list)) else (size,)
    return call("ConstantOfShape", [_shape_operand(tuple(size))], value=value)


def zeros(*size: Any, dtype: Any = np.float32) -> Any:
    """zeros(2, 3) or zeros((2, 3)); dims may be int tensors such as x.shape[0] in script."""
    return call("ConstantOfShape", [_shape_operand(size)], value=np.zeros(1, dtype))


def ones(*size: Any, dtype: Any = np.float32) -> Any:
    """ones(2, 3) or ones((2, 3)); dims may be int tensors such as x.shape[0] in script."""
    return call("ConstantOfShape", [_shape_operand(size)], value=np.ones(1, dtype))
