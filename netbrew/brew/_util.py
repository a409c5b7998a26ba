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


# Caffe2's per-axis window spellings, which its brew helpers passed on to the op
CAFFE2_WINDOW = frozenset(
    "kernel_h kernel_w stride_h stride_w pad_t pad_l pad_b pad_r dilation_h dilation_w "
    "legacy_pad".split()
)


def caffe2_window(
    op_args: dict,
    kernel: int | Sequence[int],
    stride: int | Sequence[int] | None,
    pad: int | Sequence[int],
    dilation: int | Sequence[int] | None = None,
) -> dict:
    """window_args, where `op_args` may also hold Caffe2's spellings (kernel_h, stride_w,
    pad_t..., legacy_pad): those are taken out of op_args and read as Caffe2 read them
    (netbrew.converters.caffe2's window translation), overriding the helper's own."""
    legacy = {k: op_args.pop(k) for k in list(op_args) if k in CAFFE2_WINDOW}
    if not legacy:
        return window_args(kernel, stride, pad, dilation)
    from netbrew.converters.caffe2.context import Context
    from netbrew.converters.caffe2.ops_window import window
    from netbrew.netdef.net import op_def

    args = dict(legacy)
    given = {"kernel": kernel, "stride": stride, "pad": pad, "dilation": dilation}
    for name, value in given.items():
        if value is not None and not any(k.startswith(f"{name}_") for k in legacy):
            args[name if isinstance(value, int) else f"{name}s"] = value
    return window(Context(op_def("Conv", [], ["y"], **args)))
