"""Placement: which device each op runs on, and explicit copies where a blob crosses.

    placed = plan_placement(net, device="cuda:0", params=ws.blobs(), params_device="cuda:0")
    print(placed)       # the device of each op, the copies inserted, the CPU fallbacks
    placed.net          # the NetDef to run: every op with its device, copies as ops

An op's device is its own device option, else the net's, else `device`. An op placed on a
GPU that has no CUDA kernel runs on the CPU instead, with CopyGPUToCPU/CopyCPUToGPU ops
around it and one DeviceFallbackWarning naming every such op; strict=True refuses
instead, listing them all with their counts. The copies are ordinary ops: visible in
print(net), profiled, and saved with the net (ONNX export writes them as Identity).
"""

from __future__ import annotations

import collections
import warnings
from dataclasses import dataclass, field
from typing import Any

from netbrew.errors import DeviceFallbackWarning
from netbrew.netdef.scope import device_name, parse_device
from netbrew.proto.netbrew_pb2 import DeviceOption, NetDef, OperatorDef

CPU = "cpu"


@dataclass
class Placement:
    """A placed net and what placing it did."""

    net: NetDef
    devices: list[str] = field(default_factory=list)  # per op of `net`
    copies: list[tuple[str, str, str]] = field(default_factory=list)  # (blob, from, to)
    fallbacks: collections.Counter = field(default_factory=collections.Counter)

    def __str__(self) -> str:
        lines = [f"placement of net {self.net.name or '<unnamed>'!r}:"]
        for op, device in zip(self.net.op, self.devices):
            outs = ", ".join(op.output)
            lines.append(f"  {device:<8} {outs} = {op.type}({', '.join(op.input)})")
        if self.copies:
            lines.append(f"copies ({len(self.copies)}):")
            lines += [f"  {blob}: {src} -> {dst}" for blob, src, dst in self.copies]
        if self.fallbacks:
            listed = ", ".join(f"{t} x{n}" for t, n in sorted(self.fallbacks.items()))
            lines.append(f"CPU fallbacks (no CUDA kernel): {listed}")
        return "\n".join(lines)


def has_kernel(op_type: str, device: str) -> bool:
    from netbrew.operators import KERNELS

    return (op_type, device.split(":")[0]) in KERNELS


def _wanted(op: OperatorDef, net: NetDef, device: str | None) -> str:
    if op.HasField("device_option"):
        return device_name(op.device_option)
    if net.HasField("device_option"):
        return device_name(net.device_option)
    return device or CPU


def missing_kernels(net: NetDef, device: str | None = None) -> collections.Counter:
    """Op types (with counts) that would run on a GPU but have no CUDA kernel."""
    missing: collections.Counter = collections.Counter()
    for op in net.op:
        where = _wanted(op, net, device)
        if where != CPU and not has_kernel(op.type, where):
            missing[op.type] += 1
    return missing


def wants_gpu(net: NetDef) -> bool:
    """True when the net or any op asks for a device other than the CPU."""
    if net.HasField("device_option") and net.device_option.device_type != 0:
        return True
    return any(op.HasField("device_option") and op.device_option.device_type for op in net.op)


def plan_placement(
    net: Any,
    *,
    device: str | None = None,
    params: Any = (),
    params_device: str = CPU,
    locations: dict[str, str] | None = None,
    strict: bool = False,
) -> Placement:
    """Places every op of `net` (Net or NetDef; not modified) and inserts the copies.

    Args:
        device: where ops without a device option (on them or the net) run.
        params: blobs that already live on `params_device` before the net runs (the
            parameters an init net made); every other external input starts on the CPU.
        params_device: where `params` live.
        locations: blob -> device for blobs that exist already (a Workspace's), over
            params and params_device.
        strict: refuse an op that asks for a GPU and has no CUDA kernel.

    Raises:
        DeviceError: strict, and some ops have no CUDA kernel; all are listed, counted.
    """
    from netbrew.cuda import DeviceError

    proto: NetDef = net.proto() if hasattr(net, "proto") else net
    missing = missing_kernels(proto, device)
    if missing and strict:
        listed = ", ".join(f"{t} x{n}" for t, n in sorted(missing.items()))
        raise DeviceError(
            f"net {proto.name!r}: {sum(missing.values())} op(s) have no CUDA kernel and "
            f"strict placement refuses a CPU fallback: {listed}"
        )
    out = NetDef()
    out.CopyFrom(proto)
    del out.op[:]
    out.ClearField("device_option")
    placement = Placement(out, fallbacks=missing)
    location = {b: params_device for b in params}
    location.update(locations or {})
    copies: dict[tuple[str, str], str] = {}  # (blob, device) -> the copy's name there
    for op in proto.op:
        where = _wanted(op, proto, device)
        if where != CPU and not has_kernel(op.type, where):
            where = CPU
        placed = OperatorDef()
        placed.CopyFrom(op)
        placed.device_option.CopyFrom(_option(where))
        for k, blob in enumerate(op.input):
            src = location.get(blob, CPU)
            if blob and src != where:
                placed.input[k] = _copy(placement, copies, blob, src, where)
        for blob in op.output:
            location[blob] = where
            for key in [k for k in copies if k[0] == blob]:  # stale after the write
                del copies[key]
        out.op.append(placed)
        placement.devices.append(where)
    if missing:
        listed = ", ".join(f"{t} x{n}" for t, n in sorted(missing.items()))
        warnings.warn(
            f"net {proto.name!r}: {sum(missing.values())} op(s) have no CUDA kernel and run "
            f"on the CPU, with copies around them: {listed}",
            DeviceFallbackWarning,
            stacklevel=2,
        )
    return placement


def _option(device: str) -> DeviceOption:
    return DeviceOption() if device == CPU else parse_device(device)


def _copy(placement: Placement, copies: dict, blob: str, src: str, dst: str) -> str:
    """The name of `blob` on `dst`, adding a copy op unless one is still valid."""
    key = (blob, dst)
    if key in copies:
        return copies[key]
    if src != CPU and dst != CPU:  # between two GPUs: through the host
        return _copy(placement, copies, _copy(placement, copies, blob, src, CPU), CPU, dst)
    tag = dst.replace(":", "")
    name = f"{blob}__{tag}"
    to_gpu = dst != CPU
    op = OperatorDef(type="CopyCPUToGPU" if to_gpu else "CopyGPUToCPU", input=[blob], output=[name])
    op.device_option.CopyFrom(_option(dst if to_gpu else src))  # the GPU's context runs it
    placement.net.op.append(op)
    placement.devices.append(dst if to_gpu else src)
    placement.copies.append((blob, src, dst))
    copies[key] = name
    return name
