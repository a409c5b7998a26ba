"""Argument protos <-> Python values."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from netbrew.proto.netbrew_pb2 import Argument, NetDef, TensorProto


def arg_value(arg: Argument) -> Any:
    """The Python value of an Argument: a scalar, str, list, ndarray or NetDef.

    Strings are decoded as UTF-8 where they can be and stay bytes otherwise.
    """
    from netbrew.netdef.tensor import to_array

    for scalar in ("f", "i"):
        if arg.HasField(scalar):
            return getattr(arg, scalar)
    if arg.HasField("s"):
        return _text(arg.s)
    if arg.HasField("t"):
        return to_array(arg.t)
    if arg.HasField("n"):
        return arg.n
    if arg.floats:
        return list(arg.floats)
    if arg.ints:
        return list(arg.ints)
    if arg.strings:
        return [_text(s) for s in arg.strings]
    if arg.tensors:
        return [to_array(t) for t in arg.tensors]
    if arg.nets:
        return list(arg.nets)
    return []


def _text(data: bytes) -> str | bytes:
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data


def make_arg(name: str, value: Any) -> Argument:
    """Builds an Argument from a Python value (bool and int -> i, float -> f, ...)."""
    from netbrew.netdef.tensor import from_array

    arg = Argument(name=name)
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        arg.i = int(value)
    elif isinstance(value, (float, np.floating)):
        arg.f = float(value)
    elif isinstance(value, str):
        arg.s = value.encode()
    elif isinstance(value, bytes):
        arg.s = value
    elif isinstance(value, TensorProto):
        arg.t.CopyFrom(value)
    elif isinstance(value, np.ndarray):
        arg.t.CopyFrom(from_array(value))
    elif isinstance(value, NetDef):
        arg.n.CopyFrom(value)
    elif hasattr(value, "proto") and callable(value.proto):
        arg.n.CopyFrom(value.proto())
    elif isinstance(value, Iterable):
        _fill_list(arg, list(value))
    else:
        raise TypeError(f"argument {name!r}: cannot store a {type(value).__name__}")
    return arg


def _fill_list(arg: Argument, items: list) -> None:
    if not items:
        return
    if all(isinstance(v, (bool, int, np.integer, np.bool_)) for v in items):
        arg.ints.extend(int(v) for v in items)
    elif all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
        arg.floats.extend(float(v) for v in items)
    elif all(isinstance(v, (str, bytes)) for v in items):
        arg.strings.extend(v.encode() if isinstance(v, str) else v for v in items)
    elif all(isinstance(v, (np.ndarray, TensorProto)) for v in items):
        from netbrew.netdef.tensor import from_array

        arg.tensors.extend(v if isinstance(v, TensorProto) else from_array(v) for v in items)
    elif all(isinstance(v, NetDef) or hasattr(v, "proto") for v in items):
        arg.nets.extend(v if isinstance(v, NetDef) else v.proto() for v in items)
    else:
        kinds = sorted({type(v).__name__ for v in items})
        raise TypeError(f"argument {arg.name!r}: cannot store a list of {', '.join(kinds)}")


def args_dict(args: Iterable[Argument]) -> dict[str, Any]:
    """Name -> value for a repeated Argument field."""
    return {a.name: arg_value(a) for a in args}


def set_args(target: Any, values: Mapping[str, Any]) -> None:
    """Appends Arguments for `values` to a proto's `arg` field."""
    target.arg.extend(make_arg(k, v) for k, v in values.items())


OVERRIDABLE = "netbrew_overridable"
"""A net argument naming parameters a feed may replace (ONNX initializers that are also
graph inputs): the inference passes keep them as inputs, never folded as constants."""


def overridable(net: NetDef) -> set[str]:
    """The blobs `net`'s OVERRIDABLE argument names."""
    return {b.decode() for a in net.arg if a.name == OVERRIDABLE for b in a.strings}
