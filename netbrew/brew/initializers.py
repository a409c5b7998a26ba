"""Parameter initializers: each adds one fill op for a parameter to an init net."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.netdef.net import Net


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


_GIVEN_FILLS = {"f": "GivenTensorFill", "i": "GivenTensorInt64Fill", "b": "GivenTensorBoolFill"}


def add_given_fill(init_net: Net, name: str, array: np.ndarray) -> None:
    """A GivenTensor*Fill op that recreates `array` exactly (float32/64, int32/64, bool)."""
    array = np.asarray(array)
    kind = array.dtype.kind if array.dtype.kind in "fb" else "i"
    op_type = _GIVEN_FILLS[kind]
    if array.dtype == np.int32:
        op_type = "GivenTensorIntFill"
    elif array.dtype == np.float64:
        op_type = "GivenTensorDoubleFill"
    values = array.reshape(-1).tolist()
    init_net.add_op(op_type, [], name, shape=list(array.shape), values=values)


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
