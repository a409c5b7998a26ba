"""Name and device scopes, as Caffe2's `core.NameScope` and `core.DeviceScope`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from netbrew.proto.netbrew_pb2 import DeviceOption

_state = threading.local()
SEPARATOR = "/"


def current_name_scope() -> str:
    """The active prefix, ending in '/' when not empty."""
    return getattr(_state, "prefix", "")


def current_device() -> DeviceOption | None:
    """The DeviceOption of the innermost device_scope, or None."""
    return getattr(_state, "device", None)


@contextmanager
def name_scope(prefix: str, *, reset: bool = False) -> Iterator[str]:
    """Prefixes blob names made inside the block with `prefix/` (nested scopes stack).

    Args:
        prefix: the scope name; "" opens no new level.
        reset: start from the root instead of the enclosing scope.
    """
    old = current_name_scope()
    base = "" if reset else old
    _state.prefix = base + prefix + SEPARATOR if prefix else base
    try:
        yield _state.prefix
    finally:
        _state.prefix = old


@contextmanager
def device_scope(device: DeviceOption | str) -> Iterator[DeviceOption]:
    """Places ops created inside the block on `device` ("cpu", "cuda", "cuda:1" or a proto)."""
    old = current_device()
    _state.device = parse_device(device)
    try:
        yield _state.device
    finally:
        _state.device = old


def parse_device(device: DeviceOption | str) -> DeviceOption:
    """'cpu', 'cuda' or 'cuda:N' (or a DeviceOption) -> DeviceOption."""
    if isinstance(device, DeviceOption):
        return device
    kind, _, index = device.lower().partition(":")
    types = {"cpu": 0, "cuda": 1, "gpu": 1}
    if kind not in types or (index and not index.isdigit()):
        raise ValueError(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
    return DeviceOption(device_type=types[kind], device_id=int(index or 0))


def device_name(option: DeviceOption | None) -> str:
    """'cpu' or 'cuda:N' for a DeviceOption (None is cpu)."""
    if option is None or option.device_type == 0:
        return "cpu"
    if option.device_type == 1:
        return f"cuda:{option.device_id}"
    return f"device_type {option.device_type}:{option.device_id}"


def in_canonical_scope() -> bool:
    """True inside canonical_scope: ops are being added in netbrew's own spellings."""
    return getattr(_state, "canonical", 0) > 0


@contextmanager
def canonical_scope() -> Iterator[None]:
    """Marks ops added inside the block as written in netbrew's canonical spellings.

    netbrew.caffe2's `core.Net` translates Caffe2's spellings of every op a script adds
    (Conv's kernel/pad, Softmax's flattening axis); the brew helpers and optimizers add
    canonical ops to the same net, and say so with this scope."""
    _state.canonical = getattr(_state, "canonical", 0) + 1
    try:
        yield
    finally:
        _state.canonical -= 1
