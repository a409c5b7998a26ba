"""Layer recognition for plan.py: one function per op type that says whether an op is a
layer (and which: kind, spatial rank, constructor keywords, parameter blobs), the pattern
`MatMul(x, Transpose(W)) + b` that from_torch writes for Linear on N-d inputs, and the
static ranks that choose BatchNorm1d/2d/3d.

A recognizer gets the op, its parsed attributes, the parameter arrays aligned with its
inputs (None where an input is not a parameter) and the known ranks; it returns None when
the op must stay a functional call (asymmetric pads, transB=0, training mode...).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from netbrew.netdef.args import args_dict
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def _symmetric(pads: list[int] | None, n: int) -> list[int] | None:
    pads = list(pads or [0] * 2 * n)
    return pads[:n] if pads[:n] == pads[n:] else None


def _conv(op, attrs, arrays, ranks) -> tuple | None:
    w, b = arrays[1], arrays[2] if len(arrays) > 2 else None
    if w is None or len(op.input) < 2 or w.ndim not in (3, 4, 5) or attrs["auto_pad"] != "NOTSET":
        return None
    n, group = w.ndim - 2, attrs["group"]
    padding = _symmetric(attrs["pads"], n)
    kernel = list(w.shape[2:])
    if padding is None or attrs["kernel_shape"] not in (None, kernel):
        return None
    transposed = op.type == "ConvTranspose"
    if transposed and (attrs["output_shape"] or (b is not None and len(b) != w.shape[1] * group)):
        return None
    if not transposed and b is not None and b.shape != (w.shape[0],):
        return None
    config = {
        "in_channels": w.shape[0] if transposed else w.shape[1] * group,
        "out_channels": w.shape[1] * group if transposed else w.shape[0],
        "kernel_size": tuple(kernel),
        "stride": tuple(attrs["strides"] or [1] * n),
        "padding": tuple(padding),
        "dilation": tuple(attrs["dilations"] or [1] * n),
        "groups": group,
        "bias": b is not None,
    }
    if transposed:
        config["output_padding"] = tuple(attrs["output_padding"] or [0] * n)
    return op.type, n, config, _names(op, "weight", "bias")


def _linear(op, attrs, arrays, ranks) -> tuple | None:
    w, b = arrays[1], arrays[2] if len(arrays) > 2 else None
    if w is None or w.ndim != 2 or (b is not None and b.shape != (w.shape[0],)):
        return None
    if op.type == "Gemm":
        if (attrs["alpha"], attrs["beta"], attrs["transA"], attrs["transB"]) != (1.0, 1.0, 0, 1):
            return None
    elif (attrs["axis"], attrs["axis_w"]) != (1, 1) or b is None:
        return None
    config = {"in_features": w.shape[1], "out_features": w.shape[0], "bias": b is not None}
    return "Linear", 0, config, _names(op, "weight", "bias")


def _batch_norm(op, attrs, arrays, ranks) -> tuple | None:
    rank = ranks.get(op.input[0])
    if attrs["training_mode"] or len(op.output) > 1 or rank not in (2, 3, 4, 5):
        return None
    if any(a is None or a.ndim != 1 or a.shape != arrays[1].shape for a in arrays[1:]):
        return None
    config = {
        "num_features": arrays[1].shape[0],
        "eps": _f32(attrs["epsilon"]),
        "momentum": _f32(1.0 - _f32(attrs["momentum"])),  # 1 - 0.9f, not 0.100000024
    }
    names = _names(op, "weight", "bias", "running_mean", "running_var")
    return "BatchNorm", max(rank - 2, 1), config, names


def _layer_norm(op, attrs, arrays, ranks) -> tuple | None:
    scale, b = arrays[1], arrays[2] if len(arrays) > 2 else None
    if scale is None or len(op.output) > 1 or attrs["axis"] != -scale.ndim:
        return None
    if b is not None and b.shape != scale.shape:
        return None
    config = {
        "normalized_shape": tuple(scale.shape),
        "eps": _f32(attrs["epsilon"]),
        "elementwise_affine": True,
        "bias": b is not None,
    }
    return "LayerNorm", 0, config, _names(op, "weight", "bias")


def _embedding(op, attrs, arrays, ranks) -> tuple | None:
    table = arrays[0]
    if table is None or table.ndim != 2 or attrs["axis"] != 0 or arrays[1] is not None:
        return None
    config = {"num_embeddings": table.shape[0], "embedding_dim": table.shape[1]}
    return "Embedding", 0, config, {"weight": op.input[0]}


def _f32(value: float) -> float:
    """A float argument (stored as float32) at its shortest float32 spelling: 1e-05."""
    return float(str(np.float32(value)))


def _names(op: OperatorDef, *names: str) -> dict[str, str]:
    """Attribute -> blob for an op whose inputs 1.. are the layer's state, in order."""
    return {n: b for n, b in zip(names, op.input[1:]) if b}


RECOGNIZERS: dict[str, Callable] = {
    "Conv": _conv,
    "ConvTranspose": _conv,
    "Gemm": _linear,
    "FC": _linear,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    "Gather": _embedding,
}
# Linear on inputs of any rank, as from_torch writes it: MatMul(x, Transpose(W)) + b
_LINEAR_CHAIN = ("Transpose", "MatMul", "Add")


# -- ranks (for BatchNorm1d/2d/3d) -------------------------------------------------------

_SAME_RANK = frozenset(
    "Relu Gelu Sigmoid Tanh Softmax LogSoftmax Dropout Identity Cast Clip Neg Exp Log Sqrt "
    "Erf Abs Reciprocal LeakyRelu Elu Conv ConvTranspose MaxPool AveragePool GlobalAveragePool "
    "GlobalMaxPool BatchNormalization LayerNormalization Transpose Concat".split()
)
_BROADCAST = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "MatMul"})


def static_ranks(net: NetDef, arrays: dict[str, Any]) -> dict[str, int]:
    """Static ranks where simple rules give them; BatchNorm's class depends on its input's."""
    arrays = dict(arrays)
    for op in net.op:
        if op.type == "Constant" and "value" in args_dict(op.arg):
            arrays[op.output[0]] = args_dict(op.arg)["value"]
    ranks = {k: np.ndim(v) for k, v in arrays.items()}
    ranks.update({v.name: len(v.dims) for v in net.value_info if not v.unknown_shape})
    for op in net.op:
        known = [ranks.get(i) for i in op.input]
        rank = None
        if op.type in ("Conv", "ConvTranspose") and len(known) > 1 and known[1] is not None:
            rank = known[1]  # the weight's rank, whatever the input's is known to be
        elif op.type in _SAME_RANK and known and known[0] is not None:
            rank = known[0]
        elif op.type in _BROADCAST and known and None not in known:
            rank = max(known)
        elif op.type in ("Gemm", "Flatten"):
            rank = 2
        elif op.type == "FC":
            rank = args_dict(op.arg).get("axis", 1) + 1
        elif op.type == "Reshape" and op.input[1] in arrays:
            rank = int(np.size(arrays[op.input[1]]))
        elif op.type == "Constant" and op.output[0] in arrays:
            rank = np.ndim(arrays[op.output[0]])
        for out in op.output:
            if rank is not None:
                ranks[out] = rank
            else:
                ranks.pop(out, None)
    return ranks


def linear_chain(net: NetDef, i: int, params: dict, uses: Counter, outputs: set) -> tuple | None:
    """(op count, x, y, {attr: blob}) where ops i.. are MatMul(x, Transpose(W)) [+ b]."""
    ops = net.op[i : i + 3]
    if [op.type for op in ops[:2]] != list(_LINEAR_CHAIN[:2]):
        return None
    transpose, matmul = ops[0], ops[1]
    w = params.get(transpose.input[0])
    t = transpose.output[0]
    perm = args_dict(transpose.arg).get("perm")
    if w is None or w.ndim != 2 or perm not in (None, [1, 0]) or list(matmul.input[1:]) != [t]:
        return None
    if uses[t] != 1 or t in outputs:
        return None
    names = {"weight": transpose.input[0]}
    y = matmul.output[0]
    if len(ops) == 3 and ops[2].type == "Add" and list(ops[2].input[:1]) == [y]:
        b = params.get(ops[2].input[1])
        if b is not None and b.shape == (w.shape[0],) and uses[y] == 1 and y not in outputs:
            names["bias"] = ops[2].input[1]
            return 3, matmul.input[0], ops[2].output[0], names
    return 2, matmul.input[0], y, names
