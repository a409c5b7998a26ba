"""Shared argument handling for brew helpers."""

from __future__ import annotations

from collections.abc import Sequence


def expand(value: int | Sequence[int], n: int, what: str) -> list[int]:
    """An int repeated n times, or a length-n sequence checked."""
    if isinstance(value, int):
        return [value] * n
    values = [int(v) for v in value]
    if len(values) != n:
        raise ValueError(f"{what} {values} has {len(values)} entries, expected {n}")
    return values


def spatial_rank(kernel: int | Sequence[int], default: int = 2) -> int:
    return default if isinstance(kernel, int) else len(kernel)


def window_args(
    kernel: int | Sequence[int],
    stride: int | Sequence[int] | None,
    pad: int | Sequence[int],
    dilation: int | Sequence[int] | None = None,
) -> dict[str, list[int]]:
    """ONNX window attributes from Caffe2-style ones: one value, one per spatial axis, or
    (for pad) begin and end per axis. Stride defaults to 1."""
    n = spatial_rank(kernel)
    pads = expand(pad, n, "pad") if isinstance(pad, int) or len(pad) == n else list(pad)
    args = {
        "kernel_shape": expand(kernel, n, "kernel"),
        "strides": expand(1 if stride is None else stride, n, "stride"),
        "pads": pads * 2 if len(pads) == n else expand(pads, 2 * n, "pad"),
    }
    if dilation is not None:
        args["dilations"] = expand(dilation, n, "dilation")
    return args
