"""GPU placements in Caffe2 files.

Caffe2 wrote the device an op ran on into the model (device_type 1 for CUDA, 6 for HIP),
so a model trained or exported on a GPU machine asks for a GPU. netbrew's kernels are
NumPy's and run on CPU only: such ops are placed on CPU when loaded, with one warning
for the whole model, or the model is refused when the caller asks for strictness.
"""

from __future__ import annotations

import collections
import warnings
from collections.abc import Sequence

from netbrew.errors import DeviceFallbackWarning, UnsupportedConversion
from netbrew.netdef.scope import device_name
from netbrew.proto.netbrew_pb2 import NetDef

GPU_TYPES = frozenset({1, 6})
"""Caffe2's DeviceTypeProto values that name a GPU: CUDA and HIP."""


def gpu_requests(nets: Sequence[NetDef]) -> collections.Counter[tuple[str, str]]:
    """(op type, device name) -> how many ops are placed on a GPU, by their own device
    option or, lacking one, their net's."""
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for net in nets:
        for op in net.op:
            option = op.device_option if op.HasField("device_option") else net.device_option
            if option.device_type in GPU_TYPES:
                found[(op.type, device_name(option))] += 1
    return found


def describe(requests: collections.Counter[tuple[str, str]]) -> str:
    """'5 op(s) asked for a GPU (on cuda:0: Conv x2, Relu x2, FC x1)'."""
    by_device: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for (op_type, where), count in requests.items():
        by_device[where][op_type] += count
    parts = [
        f"on {where}: " + ", ".join(f"{op_type} x{n}" for op_type, n in counts.most_common())
        for where, counts in sorted(by_device.items())
    ]
    return f"{sum(requests.values())} op(s) asked for a GPU ({'; '.join(parts)})"


def to_cpu(net: NetDef) -> None:
    """Rewrites the GPU device options of `net` and of its ops to CPU, in place. An
    option's other fields (random_seed, node_name...) stay; an option left empty goes."""
    holders = [op for op in net.op if op.HasField("device_option")]
    if net.HasField("device_option"):
        holders.append(net)
    for holder in holders:
        option = holder.device_option
        if option.device_type in GPU_TYPES:
            option.ClearField("device_type")
            option.ClearField("device_id")
            if not option.ListFields():
                holder.ClearField("device_option")


def gpu_fallback(legacy: Sequence[tuple[str, NetDef]], *, strict: bool) -> str | None:
    """The warning to give for the GPU-placed ops of the legacy nets, None if none.

    Args:
        legacy: (what the net is, e.g. "predict net", the net) for each net of a model.
        strict: refuse a model that asks for a GPU instead.

    Raises:
        UnsupportedConversion: strict, and some op asks for a GPU; names the ops by type.
    """
    requests = gpu_requests([net for _, net in legacy])
    if not requests:
        return None
    nets = sorted({f"{what} {net.name or '<unnamed>'!r}" for what, net in legacy
                   if gpu_requests([net])})  # fmt: skip
    where = " and ".join(nets)
    if strict:
        raise UnsupportedConversion(
            f"{where}: {describe(requests)}, but netbrew runs its kernels on CPU only "
            "(load with strict=False to run them on CPU)"
        )
    return (
        f"{where}: {describe(requests)}; netbrew has no GPU kernels, so they run on CPU "
        "(load with strict=True to refuse such a model)"
    )


def place_on_cpu(message: str | None, translated: Sequence[NetDef]) -> None:
    """Moves the translated nets' GPU ops to CPU and warns once with `message`."""
    if message is None:
        return
    for net in translated:
        to_cpu(net)
    warnings.warn(message, DeviceFallbackWarning, stacklevel=3)
