"""Sliding windows shared by Conv, ConvTranspose and the pooling ops.

Spatial attributes follow ONNX. `pads` is [x1_begin, ..., xn_begin, x1_end, ..., xn_end].
`auto_pad` is NOTSET (use `pads`), VALID (no padding), or SAME_UPPER / SAME_LOWER (pad so
that out = ceil(in / stride); an odd pixel goes at the end for UPPER, at the start for LOWER).
A window along an axis covers span = (kernel - 1) * dilation + 1 input pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from netbrew.errors import SchemaError, ShapeError

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
_LAYOUTS = {1: "(N, C, W)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}


def layout(n: int) -> str:
    """The dimension names of an input with `n` spatial axes, e.g. "(N, C, H, W)"."""
    return _LAYOUTS.get(n, f"(N, C, D1, ..., D{n})")


def spatial(values: Sequence[int] | None, n: int, name: str, default: int = 1) -> tuple[int, ...]:
    """Checks a per-axis attribute (strides, dilations, ...): n positive values, or the default."""
    if values is None:
        return (default,) * n
    vals = tuple(int(v) for v in values)
    if len(vals) != n:
        raise SchemaError(
            f"argument {name!r} has {len(vals)} values {list(vals)}, expected {n} "
            f"(one per spatial axis)"
        )
    if any(v < (1 if default else 0) for v in vals):
        raise SchemaError(f"argument {name!r} = {list(vals)} must be >= {1 if default else 0}")
    return vals


def check_auto_pad(auto_pad: str, pads: Sequence[int] | None) -> str:
    """Returns auto_pad after checking its value and that it is not mixed with nonzero pads."""
    if auto_pad not in AUTO_PADS:
        raise SchemaError(f"argument auto_pad={auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    if auto_pad != "NOTSET" and pads is not None and any(pads):
        raise SchemaError(
            f"arguments pads={list(pads)} and auto_pad={auto_pad} cannot be used together; "
            "drop one of them"
        )
    return auto_pad


def explicit_pads(pads: Sequence[int] | None, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Splits ONNX `pads` into (begin, end) after checking its length and sign."""
    if pads is None:
        return (0,) * n, (0,) * n
    vals = tuple(int(p) for p in pads)
    if len(vals) != 2 * n:
        raise SchemaError(
            f"argument 'pads' has {len(vals)} values {list(vals)}, expected {2 * n} "
            f"([x1_begin, ..., x{n}_begin, x1_end, ..., x{n}_end])"
        )
    if any(p < 0 for p in vals):
        raise SchemaError(f"argument 'pads' = {list(vals)} must be >= 0")
    return vals[:n], vals[n:]


def same_split(total: int, auto_pad: str) -> tuple[int, int]:
    """(begin, end) for `total` padding: SAME_UPPER puts the odd pixel at the end."""
    small = total // 2
    return (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)


@dataclass(frozen=True)
class Window:
    """Where the windows of a convolution or pooling fall along each spatial axis.

    `begin` and `end` are the padding before and after each axis; `out` is the number of
    windows. With ceil_mode the last window may reach past `end`.
    """

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: tuple[int, ...]
    end: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def span(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def make_window(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
) -> Window:
    """Resolves padding and output size for windows over an input of spatial shape `in_shape`.

    Args:
        in_shape: the input's spatial dims (D1, ..., Dn).
        kernel: window size per axis.
        strides, dilations, pads, auto_pad: the ONNX attributes (None = defaults).
        ceil_mode: round the window count up; a window that would start in the end padding
            is dropped. Ignored with auto_pad, whose output size is fixed.

    Raises:
        SchemaError: attribute lengths or values do not fit.
        ShapeError: the padded input is smaller than one window.
    """
    n = len(in_shape)
    kernel = spatial(kernel, n, "kernel_shape")
    strides = spatial(strides, n, "strides")
    dilations = spatial(dilations, n, "dilations")
    auto_pad = check_auto_pad(auto_pad, pads)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad == "NOTSET":
        begin, end = explicit_pads(pads, n)
    elif auto_pad == "VALID":
        begin, end = (0,) * n, (0,) * n
    else:
        totals = [
            max(0, (-(-i // s) - 1) * s + sp - i) for i, s, sp in zip(in_shape, strides, spans)
        ]
        begin, end = zip(*(same_split(t, auto_pad) for t in totals))
    out = []
    for axis, (i, s, sp, b, e) in enumerate(zip(in_shape, strides, spans, begin, end)):
        room = i + b + e - sp
        if room < 0:
            raise ShapeError(
                f"input X spatial axis {axis} has size {i} (padded: {i + b + e}), smaller than "
                f"the window span {sp} (kernel_shape={list(kernel)}, dilations={list(dilations)})"
            )
        count = room // s + 1
        if ceil_mode and auto_pad == "NOTSET":
            count = -(-room // s) + 1
            if (count - 1) * s >= i + b:  # the last window would start in the end padding
                count -= 1
        out.append(count)
    return Window(kernel, strides, dilations, tuple(begin), tuple(end), tuple(out))


def pad_to_windows(x: np.ndarray, win: Window, value: float = 0) -> np.ndarray:
    """`x` padded with `value` (or cropped at the end) so its trailing axes hold exactly the
    windows of `win`; returned as is when nothing changes."""
    n = len(win.kernel)
    lead = x.shape[:-n]
    ends = [
        (o - 1) * s + sp - i - b
        for o, s, sp, i, b in zip(win.out, win.strides, win.span, x.shape[-n:], win.begin)
    ]
    if any(e < 0 for e in ends):  # trailing pixels no window reaches
        x = x[(..., *(slice(0, i + min(e, 0)) for i, e in zip(x.shape[-n:], ends)))]
    if not any(win.begin) and all(e <= 0 for e in ends):
        return x
    widths = [(0, 0)] * len(lead) + [(b, max(e, 0)) for b, e in zip(win.begin, ends)]
    return np.pad(x, widths, constant_values=value)


def windows(xp: np.ndarray, win: Window) -> np.ndarray:
    """A read-only strided view (..., O1..On, k1..kn) of the windows of `pad_to_windows` output.

    No data is copied: view[..., o, j] = xp[..., o * stride + j * dilation].
    """
    n = len(win.kernel)
    view = sliding_window_view(xp, win.span, axis=tuple(range(xp.ndim - n, xp.ndim)))
    picks = [slice(0, (o - 1) * s + 1, s) for o, s in zip(win.out, win.strides)]
    picks += [slice(None, None, d) for d in win.dilations]
    return view[(..., *picks)]


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to compute in: float16/bfloat16 widen to float32 (BLAS, accuracy)."""
    return np.dtype(np.float32) if dtype.itemsize < 4 and dtype.kind not in "iub" else dtype


def check_conv_operands(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None,
    group: int,
    kernel_shape: Sequence[int] | None,
    transposed: bool,
) -> int:
    """Checks X, W, B of Conv (W is (M, C/group, k...)) or ConvTranspose (W is (C, M/group,
    k...)) against each other; returns M, the output channel count."""
    what = "transposed convolution" if transposed else "convolution"
    w_dims = "(C, M/group, k1, ..., kn)" if transposed else "(M, C/group, k1, ..., kn)"
    if w.ndim < 3:
        raise ShapeError(f"input W has shape {list(w.shape)}, expected at least 3 dims {w_dims}")
    n = w.ndim - 2
    if x.ndim != w.ndim:
        raise ShapeError(
            f"input X has {x.ndim} dims, expected {w.ndim} {layout(n)} for a {n}-D {what} "
            f"with weight W of shape {list(w.shape)}"
        )
    if group < 1:
        raise SchemaError(f"argument group={group} must be >= 1")
    if kernel_shape is not None and tuple(kernel_shape) != w.shape[2:]:
        raise ShapeError(
            f"argument kernel_shape={list(kernel_shape)} does not match the spatial dims "
            f"{list(w.shape[2:])} of W {list(w.shape)}"
        )
    c = x.shape[1]
    want = w.shape[0] if transposed else group * w.shape[1]
    if c != want:
        detail = "W's first dim" if transposed else "group*C_in"
        raise ShapeError(
            f"input X has C={c} channels but W expects {detail} = {want} "
            f"(group={group}, W shape {list(w.shape)} is {w_dims})"
        )
    m = w.shape[1] * group if transposed else w.shape[0]
    split = c if transposed else m
    if split % group:
        raise ShapeError(
            f"{split} {'input' if transposed else 'output'} channels do not "
            f"divide into group={group}"
        )
    if b is not None and b.shape != (m,):
        raise ShapeError(
            f"input B has shape {list(b.shape)}, expected [{m}] (one per output channel)"
        )
    for name, arr in (("W", w), ("B", b)):
        if arr is not None and arr.dtype != x.dtype:
            raise SchemaError(f"input {name} has dtype {arr.dtype}, expected {x.dtype} like X")
    return m
