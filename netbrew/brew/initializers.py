"""Parameter initializers: each adds one fill op for a parameter to an init net."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.netdef.net import Net, op_def
from netbrew.proto.netbrew_pb2 import NetDef


class Initializer:
    """Adds the op that fills parameter `name` of `shape` to `init_net`."""

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class XavierInit(Initializer):
    """Uniform in ±sqrt(3 / fan_in), fan_in = numel / shape[0] (Caffe2's XavierFill)."""

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        init_net.XavierFill([], name, shape=list(shape))


@dataclass(frozen=True)
class MSRAInit(Initializer):
    """Gaussian with std sqrt(2 / fan_out), fan_out = numel / shape[1] (Caffe2's MSRAFill)."""

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        init_net.MSRAFill([], name, shape=list(shape))


@dataclass(frozen=True)
class GaussianInit(Initializer):
    """Gaussian with the given mean and std."""

    std: float = 0.01
    mean: float = 0.0

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        init_net.GaussianFill([], name, shape=list(shape), mean=self.mean, std=self.std)


@dataclass(frozen=True)
class ConstantInit(Initializer):
    """Every element equal to `value`."""

    value: float = 0.0

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        init_net.ConstantFill([], name, shape=list(shape), value=float(self.value))


class FromArray(Initializer):
    """Exactly the values of an existing array (e.g. pretrained weights)."""

    def __init__(self, array: Any) -> None:
        self.array = np.asarray(array)

    def create(self, init_net: Net, name: str, shape: tuple[int, ...]) -> None:
        if tuple(self.array.shape) != tuple(shape):
            raise ValueError(
                f"parameter {name!r}: array has shape {list(self.array.shape)}, "
                f"expected {list(shape)}"
            )
        add_given_fill(init_net, name, self.array)


GIVEN_FILLS = {
    np.dtype(np.float32): "GivenTensorFill",
    np.dtype(np.int32): "GivenTensorIntFill",
    np.dtype(np.int64): "GivenTensorInt64Fill",
    np.dtype(np.int16): "GivenTensorInt16Fill",
    np.dtype(np.bool_): "GivenTensorBoolFill",
}
"""The dtypes a GivenTensor*Fill holds exactly (its values argument has no other)."""


def add_given_fill(init_net: Net | NetDef, name: str, array: Any) -> None:
    """Appends an op that fills blob `name` with exactly `array`: a GivenTensor*Fill, as
    Caffe2 init nets have, for float32, int16/32/64 and bool; GivenTensorStringFill for
    bytes and strings; a Constant holding a TensorProto for every other dtype (float64
    and float16 would lose bits in the fills' float list, uint8 would widen to int64)."""
    array = np.asarray(array)
    if array.dtype.kind in "SUO":
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1)]
        _append(init_net, "GivenTensorStringFill", name, shape=list(array.shape), values=flat)
    elif array.dtype in GIVEN_FILLS:
        flat = array.reshape(-1)
        values = flat.astype(np.int64).tolist() if array.dtype == np.bool_ else flat.tolist()
        _append(init_net, GIVEN_FILLS[array.dtype], name, shape=list(array.shape), values=values)
    else:
        _append(init_net, "Constant", name, value=array)


def _append(init_net: Net | NetDef, op_type: str, name: str, **args: Any) -> None:
    if isinstance(init_net, NetDef):
        init_net.op.append(op_def(op_type, [], [name], **args))
    else:  # through Net.add_op: the device scope places the parameter
        init_net.add_op(op_type, [], name, **args)


def resolve(init: Initializer | tuple | None, default: Initializer) -> Initializer:
    """An Initializer from an instance, a Caffe2-style ("XavierFill", {...}) tuple, or None."""
    if init is None:
        return default
    if isinstance(init, Initializer):
        return init
    if isinstance(init, tuple) and init and isinstance(init[0], str):
        kind, kwargs = init[0], (init[1] if len(init) > 1 else {})
        table = {
            "XavierFill": XavierInit,
            "MSRAFill": MSRAInit,
            "GaussianFill": GaussianInit,
            "ConstantFill": ConstantInit,
        }
        if kind not in table:
            raise ValueError(f"unknown initializer {kind!r}; known: {', '.join(table)}")
        return table[kind](**kwargs)
    raise TypeError(f"expected an Initializer or a ('XavierFill', {{...}}) tuple, got {init!r}")
