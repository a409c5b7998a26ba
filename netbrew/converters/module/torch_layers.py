"""from_torch converters for layers: one function per layer, for the module and its functional
form alike (nn.Conv2d and F.conv2d share `conv`, since torch names module attributes and
keyword arguments the same way).

Each converter reads the call through `TorchGraph` (`g.arg` for options, `g.weight` for
parameter blobs, `g.tensor` for recorded shapes) and appends netbrew ops with ONNX
semantics. A configuration netbrew cannot express raises UnsupportedConversion with the
reason; from_torch collects those and reports them together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.converters.module.torch_graph import TorchGraph, np_dtype
from netbrew.converters.module.torch_ops import converts
from netbrew.errors import UnsupportedConversion

F = "torch.nn.functional"


def _tuple(value: Any, n: int) -> list[int | None]:
    """torch's int-or-tuple options as a list of n ints (None stays None: an adaptive
    pool's 'keep this size')."""
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return _tuple(value[0], n)
        return [None if v is None else int(v) for v in value]
    return [None if value is None else int(value)] * n


def _param_shape(g: TorchGraph, node: Any, name: str, index: int) -> tuple[int, ...]:
    if node.op == "call_module":
        return tuple(getattr(g.module(node), name).shape)
    arg = node.args[index] if index < len(node.args) else node.kwargs[name]
    return tuple(g.tensor(arg).shape)


def _inputs(*blobs: str | None) -> list[str]:
    """Op inputs without trailing omitted optionals."""
    names = ["" if b is None else b for b in blobs]
    while names and not names[-1]:
        names.pop()
    return names


def _check_padding_mode(g: TorchGraph, node: Any) -> None:
    mode = getattr(g.module(node), "padding_mode", "zeros") if node.op == "call_module" else ""
    if mode not in ("", "zeros"):
        raise UnsupportedConversion(f"padding_mode={mode!r} (only 'zeros' converts)")


def _conv_pads(padding: Any, kernel: Sequence[int], dilation: Sequence[int]) -> list[int]:
    """ONNX pads [begins..., ends...] from torch's padding (ints, 'valid' or 'same')."""
    n = len(kernel)
    if padding == "valid":
        return [0] * 2 * n
    if padding == "same":  # torch puts the odd pixel at the end
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [t // 2 for t in total] + [t - t // 2 for t in total]
    pads = _tuple(padding, n)
    return pads + pads


@converts(
    "torch.nn.Conv1d", "torch.nn.Conv2d", "torch.nn.Conv3d",
    f"{F}.conv1d", f"{F}.conv2d", f"{F}.conv3d",
)  # fmt: skip
def conv(g: TorchGraph, node: Any) -> None:
    """Conv(x, weight, bias) with kernel_shape, strides, pads, dilations, group."""
    _check_padding_mode(g, node)
    kernel = list(_param_shape(g, node, "weight", 1)[2:])
    n = len(kernel)
    dilation = _tuple(g.arg(node, 5, "dilation", 1), n)
    g.emit(
        "Conv",
        _inputs(g.blob(node.args[0]), g.weight(node, "weight", 1), g.weight(node, "bias", 2)),
        node,
        kernel_shape=kernel,
        strides=_tuple(g.arg(node, 3, "stride", 1), n),
        pads=_conv_pads(g.arg(node, 4, "padding", 0), kernel, dilation),
        dilations=dilation,
        group=int(g.arg(node, 6, "groups", 1)),
    )


@converts(
    "torch.nn.ConvTranspose1d", "torch.nn.ConvTranspose2d", "torch.nn.ConvTranspose3d",
    f"{F}.conv_transpose1d", f"{F}.conv_transpose2d", f"{F}.conv_transpose3d",
)  # fmt: skip
def conv_transpose(g: TorchGraph, node: Any) -> None:
    """ConvTranspose(x, weight, bias); torch's weight layout (C, M/group, k...) is ONNX's."""
    _check_padding_mode(g, node)
    if node.op == "call_module" and (len(node.args) > 1 or "output_size" in node.kwargs):
        raise UnsupportedConversion("an output_size argument (give output_padding instead)")
    kernel = list(_param_shape(g, node, "weight", 1)[2:])
    n = len(kernel)
    pads = _tuple(g.arg(node, 4, "padding", 0), n)
    g.emit(
        "ConvTranspose",
        _inputs(g.blob(node.args[0]), g.weight(node, "weight", 1), g.weight(node, "bias", 2)),
        node,
        kernel_shape=kernel,
        strides=_tuple(g.arg(node, 3, "stride", 1), n),
        pads=pads + pads,
        output_padding=_tuple(g.arg(node, 5, "output_padding", 0), n),
        group=int(g.arg(node, 6, "groups", 1)),
        dilations=_tuple(g.arg(node, 7, "dilation", 1), n),
    )


def emit_linear(g: TorchGraph, node: Any, x: Any, weight: str, bias: str | None) -> None:
    """y = x W^T + b: Gemm(transB=1) for 2-D x, else MatMul(x, Transpose(W)) + b."""
    if g.tensor(x).dim() == 2:
        g.emit("Gemm", _inputs(g.blob(x), weight, bias), node, transB=1)
        return
    w_t = g.emit("Transpose", [weight], f"{node.name}_weight_t", perm=[1, 0])
    if bias is None:
        g.emit("MatMul", [g.blob(x), w_t], node)
        return
    product = g.emit("MatMul", [g.blob(x), w_t], f"{node.name}_matmul")
    g.emit("Add", [product, bias], node)


@converts("torch.nn.Linear", f"{F}.linear")
def linear(g: TorchGraph, node: Any) -> None:
    """Linear / F.linear: see emit_linear."""
    emit_linear(g, node, node.args[0], g.weight(node, "weight", 1), g.weight(node, "bias", 2))


def _ones(g: TorchGraph, node: Any, shape: Sequence[int], value: float, what: str) -> str:
    dtype = np_dtype(g.tensor(node.args[0]).dtype)
    return g.const(np.full(tuple(shape), value, dtype=dtype), f"{node.name}_{what}")


@converts("torch.nn.BatchNorm1d", "torch.nn.BatchNorm2d", "torch.nn.BatchNorm3d", f"{F}.batch_norm")
def batch_norm(g: TorchGraph, node: Any) -> None:
    """BatchNormalization with the running statistics (eval mode only)."""
    if node.op == "call_module":
        module = g.module(node)
        if module.training or module.running_mean is None:
            raise UnsupportedConversion(
                "uses batch statistics (training mode, or track_running_stats=False); "
                "call .eval() on a module that tracks running statistics"
            )
    elif g.arg(node, 5, "training", False):
        raise UnsupportedConversion("training=True uses batch statistics; pass training=False")
    channels = g.tensor(node.args[0]).shape[1]
    scale = g.weight(node, "weight", 3) or _ones(g, node, [channels], 1.0, "scale")
    bias = g.weight(node, "bias", 4) or _ones(g, node, [channels], 0.0, "bias")
    momentum = g.arg(node, 6, "momentum", 0.1)
    g.emit(
        "BatchNormalization",
        [g.blob(node.args[0]), scale, bias, *(g.weight(node, n, i) for n, i in _STATS)],
        node,
        epsilon=float(g.arg(node, 7, "eps", 1e-5)),
        momentum=None if momentum is None else 1.0 - float(momentum),  # ONNX keeps the old
    )


_STATS = (("running_mean", 1), ("running_var", 2))


@converts("torch.nn.LayerNorm", f"{F}.layer_norm")
def layer_norm(g: TorchGraph, node: Any) -> None:
    """LayerNormalization over the last len(normalized_shape) dims."""
    shape = _tuple(g.arg(node, 1, "normalized_shape"), 1)
    scale = g.weight(node, "weight", 2) or _ones(g, node, shape, 1.0, "scale")
    g.emit(
        "LayerNormalization",
        _inputs(g.blob(node.args[0]), scale, g.weight(node, "bias", 3)),
        node,
        axis=-len(shape),
        epsilon=float(g.arg(node, 4, "eps", 1e-5)),
    )


@converts("torch.nn.Embedding", f"{F}.embedding")
def embedding(g: TorchGraph, node: Any) -> None:
    """Gather(weight, indices, axis=0); max_norm (which renormalises the table) is refused."""
    if g.arg(node, 3, "max_norm") is not None:
        raise UnsupportedConversion("max_norm renormalises the weight in place")
    indices = node.args[0]
    g.emit("Gather", [g.weight(node, "weight", 1), g.blob(indices)], node, axis=0)


def _window(g: TorchGraph, node: Any) -> dict[str, list[int]]:
    """kernel_shape, strides (kernel_size by default) and pads of a pooling call."""
    rank = g.tensor(node.args[0]).dim()
    kernel = g.arg(node, 1, "kernel_size", None)
    if rank < 3 or (isinstance(kernel, (list, tuple)) and len(kernel) not in (1, rank - 2)):
        raise UnsupportedConversion(f"unbatched input of rank {rank}; add a batch dim")
    n = rank - 2
    kernel = _tuple(g.arg(node, 1, "kernel_size"), n)
    pads = _tuple(g.arg(node, 3, "padding", 0), n)
    strides = _tuple(g.arg(node, 2, "stride") or kernel, n)
    return {"kernel_shape": kernel, "strides": strides, "pads": pads + pads}


@converts(
    "torch.nn.MaxPool1d", "torch.nn.MaxPool2d", "torch.nn.MaxPool3d",
    f"{F}.max_pool1d", f"{F}.max_pool2d", f"{F}.max_pool3d",
)  # fmt: skip
def max_pool(g: TorchGraph, node: Any) -> None:
    """MaxPool; return_indices (torch's indices differ from ONNX's) is refused."""
    if g.arg(node, 6, "return_indices", False):
        raise UnsupportedConversion("return_indices=True")
    window = _window(g, node)
    g.emit(
        "MaxPool",
        [g.blob(node.args[0])],
        node,
        **window,
        dilations=_tuple(g.arg(node, 4, "dilation", 1), len(window["kernel_shape"])),
        ceil_mode=int(bool(g.arg(node, 5, "ceil_mode", False))),
    )


@converts(
    "torch.nn.AvgPool1d", "torch.nn.AvgPool2d", "torch.nn.AvgPool3d",
    f"{F}.avg_pool1d", f"{F}.avg_pool2d", f"{F}.avg_pool3d",
)  # fmt: skip
def avg_pool(g: TorchGraph, node: Any) -> None:
    """AveragePool; count_include_pad defaults to True as in torch; divisor_override refused."""
    if g.arg(node, 6, "divisor_override") is not None:
        raise UnsupportedConversion("divisor_override")
    window = _window(g, node)
    g.emit(
        "AveragePool",
        [g.blob(node.args[0])],
        node,
        **window,
        ceil_mode=int(bool(g.arg(node, 4, "ceil_mode", False))),
        count_include_pad=int(bool(g.arg(node, 5, "count_include_pad", True))),
    )


def _adaptive(g: TorchGraph, node: Any, global_op: str, window_op: str) -> None:
    dims = list(g.tensor(node.args[0]).shape[2:])
    out = g.arg(node, 1, "output_size")
    out = [d if o is None else int(o) for o, d in zip(_tuple(out, len(dims)), dims)]
    x = g.blob(node.args[0])
    if all(o == 1 for o in out):
        g.emit(global_op, [x], node)
    elif all(d % o == 0 for d, o in zip(dims, out)):
        kernel = [d // o for d, o in zip(dims, out)]
        g.emit(window_op, [x], node, kernel_shape=kernel, strides=kernel)
    else:
        raise UnsupportedConversion(f"output_size {out} does not divide the input size {dims}")


@converts(
    "torch.nn.AdaptiveAvgPool1d", "torch.nn.AdaptiveAvgPool2d", "torch.nn.AdaptiveAvgPool3d",
    f"{F}.adaptive_avg_pool1d", f"{F}.adaptive_avg_pool2d", f"{F}.adaptive_avg_pool3d",
)  # fmt: skip
def adaptive_avg_pool(g: TorchGraph, node: Any) -> None:
    """GlobalAveragePool for output size 1, AveragePool where the size divides evenly."""
    _adaptive(g, node, "GlobalAveragePool", "AveragePool")


@converts(
    "torch.nn.AdaptiveMaxPool1d", "torch.nn.AdaptiveMaxPool2d", "torch.nn.AdaptiveMaxPool3d",
    f"{F}.adaptive_max_pool1d", f"{F}.adaptive_max_pool2d", f"{F}.adaptive_max_pool3d",
)  # fmt: skip
def adaptive_max_pool(g: TorchGraph, node: Any) -> None:
    """GlobalMaxPool for output size 1, MaxPool where the size divides evenly."""
    if g.arg(node, 2, "return_indices", False):
        raise UnsupportedConversion("return_indices=True")
    _adaptive(g, node, "GlobalMaxPool", "MaxPool")


@converts(
    "torch.nn.Dropout", "torch.nn.Dropout1d", "torch.nn.Dropout2d", "torch.nn.Dropout3d",
    "torch.nn.AlphaDropout", f"{F}.dropout", f"{F}.dropout1d", f"{F}.dropout2d",
    f"{F}.dropout3d", f"{F}.alpha_dropout",
)  # fmt: skip
def dropout(g: TorchGraph, node: Any) -> None:
    """The identity in eval mode; refused in training mode (it would drop at random)."""
    training = (
        g.module(node).training if node.op == "call_module" else g.arg(node, 2, "training", True)
    )
    if training and g.arg(node, 1, "p", 0.5) > 0:
        raise UnsupportedConversion("dropout in training mode; call .eval() or pass training=False")
    g.alias(node, node.args[0])


@converts("torch.nn.Identity")
def identity(g: TorchGraph, node: Any) -> None:
    """No op: the output blob is the input blob."""
    g.alias(node, node.args[0])
