"""Sliding windows shared by Conv, ConvTranspose and the pooling ops.

Spatial attributes follow ONNX. `pads` is [x1_begin, ..., xn_begin, x1_end, ..., xn_end].
`auto_pad` is NOTSET (use `pads`), VALID (no padding), or SAME_UPPER / SAME_LOWER (pad so
that out = ceil(in / stride); an odd pixel goes at the end for UPPER, at the start for LOWER).
A window along an axis covers span = (kernel - 1) * dilation + 1 input pixels.

im2col (Conv's columns) copies a strided view of the windows once; on small images, where
numpy would spend its time on many short rows, it is a GEMM with a cached 0/1 selection
matrix instead. Their adjoints (col2im, ...) live in window_grad.py.

Not kept: a numba im2col (one prange iteration per (n, c) plane, one copy per kernel tap
and output row, padding zeroed around it) measured 1.1-2.0x the strided copy on ResNet-18
training shapes ((32, 64..256, 32..8, 32..8), 3x3) and inception/squeezenet-sized ones
((1, 16..128, 56..14, ...)), and 4-16x the selection GEMM on 7x7 and 4x4 images; for
batch_columns 1.1-4.4x. The copy is bound by writing the columns (9x the input), which
NumPy's strided copy already does at memory speed (interleaved medians, 2 shared cores).

The padded input and the columns are scratch: a kernel consumes them before it returns, so
each thread reuses one buffer per purpose instead of allocating (and page-faulting in) a
fresh array per call.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.zeros import memory_order

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

    Memoised: a training net asks for the same few windows at every step.

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
    args = (kernel, strides, dilations, pads)
    return _make_window(
        tuple(in_shape), *(None if a is None else tuple(a) for a in args), auto_pad, bool(ceil_mode)
    )


@functools.lru_cache(maxsize=256)
def _make_window(in_shape, kernel, strides, dilations, pads, auto_pad, ceil_mode) -> Window:
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


_SCRATCH = threading.local()
_SCRATCH_MAX = 1 << 26  # bytes: larger temporaries are allocated per call, not kept


def scratch(tag: str, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array of `shape` backed by this thread's reusable `tag` buffer.

    Valid until the next `scratch(tag, ...)` call on the same thread, so only for
    temporaries a kernel consumes before it returns (never for its outputs).
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > _SCRATCH_MAX:
        return np.empty(shape, dtype)
    buffers = _SCRATCH.__dict__
    buf = buffers.get(tag)
    if buf is None or buf.size < nbytes:
        buf = buffers[tag] = np.empty(max(nbytes, 1 << 16), np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def pad_to_windows(x: np.ndarray, win: Window, value: float = 0) -> np.ndarray:
    """`x` padded with `value` (or cropped) so its trailing axes hold exactly the windows of
    `win`; returned as is when nothing changes. A negative `win.begin` crops the start.
    A padded result is scratch (see `scratch`): read it before the next call."""
    n = len(win.kernel)
    sizes = x.shape[-n:]
    ends = [
        (o - 1) * s + sp - i - b
        for o, s, sp, i, b in zip(win.out, win.strides, win.span, sizes, win.begin)
    ]
    if any(b < 0 for b in win.begin) or any(e < 0 for e in ends):  # pixels no window reaches
        x = x[(..., *(slice(max(-b, 0), i + min(e, 0)) for i, b, e in zip(sizes, win.begin, ends)))]
    begin, ends = [max(b, 0) for b in win.begin], [max(e, 0) for e in ends]
    if not any(begin) and not any(ends):
        return x
    # the borders filled, then one slice assignment: several times faster than np.pad on
    # small arrays, and each value is written once
    shape = x.shape[:-n] + tuple(i + b + e for i, b, e in zip(x.shape[-n:], begin, ends))
    out = scratch("pad", shape, x.dtype)
    fill_borders(out, begin, x.shape[-n:], value)
    out[(..., *(slice(b, b + i) for b, i in zip(begin, x.shape[-n:])))] = x
    return out


def fill_borders(out: np.ndarray, begin: Sequence[int], inner: Sequence[int], value: float) -> None:
    """Fills `out` with `value` everywhere but the block of size `inner` at offset `begin`
    in its trailing axes: per axis, the slabs before and after the block, within the
    block's span along the axes before it."""
    n = len(inner)
    lead = (slice(None),) * (out.ndim - n)
    for b, i, size in zip(begin, inner, out.shape[out.ndim - n :]):
        if b:
            out[(*lead, slice(0, b))] = value
        if b + i < size:
            out[(*lead, slice(b + i, size))] = value
        lead = (*lead, slice(b, b + i))


def windows(xp: np.ndarray, win: Window) -> np.ndarray:
    """A read-only strided view (..., O1..On, k1..kn) of the windows of `pad_to_windows` output.

    No data is copied: view[..., o, j] = xp[..., o * stride + j * dilation].
    """
    n = len(win.kernel)
    axes = xp.strides[-n:]
    strides = xp.strides[:-n] + tuple(a * s for a, s in zip(axes, win.strides))
    strides += tuple(a * d for a, d in zip(axes, win.dilations))
    shape = xp.shape[:-n] + win.out + win.kernel
    return as_strided(xp, shape, strides, writeable=False)


# Small images: a GEMM with a cached 0/1 selection matrix S replaces the strided copies. Its
# cost grows with the pixel count (S is dense), the copies' with the number of short runs
# (numpy pays per inner loop, which is one output row): pick the cheaper, as measured.
_SELECTION_MAX = 1 << 18  # elements of S


def use_selection(in_shape: Sequence[int], win: Window, dtype: np.dtype, scatter: bool) -> bool:
    """Whether im2col (or col2im, `scatter`) over an image of `in_shape` should use a GEMM."""
    pixels, run = math.prod(in_shape), win.out[-1]
    size = pixels * math.prod(win.kernel) * math.prod(win.out)
    budget = (320 + 14 * run) * (2 if scatter else 1)  # a strided add costs twice a copy
    return dtype.kind == "f" and size <= _SELECTION_MAX and pixels * run <= budget


@functools.lru_cache(maxsize=32)
def window_pixels(in_shape: tuple[int, ...], win: Window) -> np.ndarray:
    """(K*O1*...*On,) read-only: the flat index into an image of `in_shape` of pixel j of
    window o, at (j, o) in row-major order; -1 where it falls in the padding."""
    n = len(in_shape)
    grid = np.indices((*win.kernel, *win.out)).reshape(2 * n, -1)
    flat, valid = np.zeros(grid.shape[1], np.intp), np.ones(grid.shape[1], bool)
    for a, size in enumerate(in_shape):
        pos = grid[n + a] * win.strides[a] + grid[a] * win.dilations[a] - win.begin[a]
        valid &= (pos >= 0) & (pos < size)
        flat = flat * size + pos
    flat[~valid] = -1
    flat.flags.writeable = False
    return flat


@functools.lru_cache(maxsize=32)
def selection(in_shape: tuple[int, ...], win: Window, dtype: np.dtype) -> np.ndarray:
    """S (D1*...*Dn, K*O1*...*On), read-only: S[q, (j, o)] = 1 where pixel j of window o is
    input pixel q, so X (rows, D1*...*Dn) @ S is im2col and cols @ S.T is col2im. Padding
    reads no pixel: all-zero columns."""
    pixels = window_pixels(in_shape, win)
    s = np.zeros((math.prod(in_shape), pixels.size), dtype)
    inside = np.flatnonzero(pixels >= 0)
    s[pixels[inside], inside] = 1
    s.flags.writeable = False
    return s


def im2col(x: np.ndarray, win: Window, group: int) -> np.ndarray:
    """The windows of `x` (N, C, D1..Dn) copied once into GEMM columns (N, group,
    C/group * K, O1*...*On), rows ordered (channel, k1, ..., kn) to match W reshaped to
    (group, M/group, -1). A 1x1 kernel with stride 1 and no padding needs no copy.
    The columns are scratch (see `scratch`): use them before the next call."""
    batch, channels = x.shape[:2]
    positions = math.prod(win.out)
    if _is_identity(x, win):
        return x.reshape(batch, group, -1, positions)
    k = math.prod(win.kernel)
    if use_selection(x.shape[2:], win, x.dtype, scatter=False):
        cols = scratch("cols", (batch * channels, k * positions), x.dtype)
        np.matmul(x.reshape(batch * channels, -1), selection(x.shape[2:], win, x.dtype), out=cols)
        return cols.reshape(batch, group, -1, positions)
    n = len(win.kernel)
    view = windows(pad_to_windows(x, win), win)  # (N, C, O1..On, k1..kn), no copy
    order = (0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
    cols = scratch("cols", (batch, channels, *win.kernel, *win.out), x.dtype)
    np.copyto(cols, view.transpose(order))
    return cols.reshape(batch, group, -1, positions)


def batch_columns(x: np.ndarray, win: Window) -> np.ndarray:
    """The windows of `x` (N, C, D1..Dn) as (K, C, N * O1*...*On): for each kernel offset, a
    matrix whose columns span the whole batch, so a weight gradient is one GEMM per offset."""
    batch, channels = x.shape[:2]
    k, positions = math.prod(win.kernel), math.prod(win.out)
    if _is_identity(x, win):
        view = x.reshape(batch, channels, *win.out, *win.kernel)
    elif use_selection(x.shape[2:], win, x.dtype, scatter=False):
        s = selection(x.shape[2:], win, x.dtype).reshape(-1, k, positions).transpose(1, 0, 2)
        rows = x.reshape(batch, channels, -1).transpose(1, 0, 2).reshape(channels * batch, -1)
        return np.matmul(rows, s).reshape(k, channels, batch * positions)
    else:
        view = windows(pad_to_windows(x, win), win)
    n = len(win.kernel)
    order = (*range(2 + n, 2 + 2 * n), 1, 0, *range(2, 2 + n))
    return view.transpose(order).reshape(k, channels, batch * positions)


def tiles(win: Window, spatial: Sequence[int]) -> bool:
    """Whether the windows tile an input of spatial shape `spatial` exactly: stride =
    kernel, no dilation, no padding before, and the windows cover every pixel."""
    return (
        win.strides == win.kernel
        and set(win.dilations) == {1}
        and not any(win.begin)
        and tuple(o * k for o, k in zip(win.out, win.kernel)) == tuple(spatial)
    )


def _is_identity(x: np.ndarray, win: Window) -> bool:
    """Whether the windows are the pixels themselves (1x1 kernel, stride 1, no padding)."""
    ones = (1,) * len(win.kernel)
    same = win.out == x.shape[2:] and not any(win.begin)
    return same and win.kernel == ones and win.strides == ones


def window_slices(x: np.ndarray, win: Window, pad_value: float = 0) -> list[np.ndarray]:
    """For each kernel offset j (row-major), a strided view (N, C, O1..On) of window pixel j
    of every window, with padding read as `pad_value`: what pooling reduces over. (Views
    beat a selection GEMM here: the reductions read them once, with no copy.)"""
    xp = pad_to_windows(x, win, pad_value)
    steps = list(zip(win.dilations, win.out, win.strides))
    slices = []
    for offset in np.ndindex(*win.kernel):  # basic slicing: cheaper than an as_strided view
        picks = (slice(j * d, j * d + (o - 1) * s + 1, s) for j, (d, o, s) in zip(offset, steps))
        slices.append(xp[(..., *picks)])
    return slices


def window_reduce(x: np.ndarray, win: Window, ufunc: np.ufunc, pad_value: float = 0) -> np.ndarray:
    """`ufunc` (np.maximum, np.add, ...) reduced over each window of `x`, padding read as
    `pad_value`: (N, C, O1..On), a new array.

    Separable, one spatial axis at a time from the outermost, so a k1 x k2 window costs
    k1 + k2 steps instead of k1 * k2, and the first axis's steps read whole contiguous rows.
    Padded windows over a channels-last input (a Winograd or channels-last conv's output)
    read it in place (`axis_reduce`), never materialising the padding: copying it into a
    padded NCHW buffer is a transpose, and the reductions keep its layout instead (measured
    on Inception's and ResNet-50's pools: 0.2-0.6x the time). Contiguous inputs reduce a
    padded copy (`_reduce_padded`), whose taps run over longer rows (in place measured
    0.8-1.4x there, no steady gain). Both give the same values. For an associative,
    commutative ufunc they equal reducing `window_slices`; float sums may round differently."""
    if x.flags.c_contiguous or not any(win.begin + win.end):
        return _reduce_padded(x, win, ufunc, pad_value)
    n = len(win.kernel)
    out = x
    pad = np.asarray(pad_value, x.dtype)
    for axis, dims in enumerate(zip(win.kernel, win.strides, win.dilations, win.begin, win.out)):
        out = axis_reduce(out, x.ndim - n + axis, *dims, ufunc, pad)
        # a padded pixel, as the next axis sees it: the k pad values of its window reduced
        pad = functools.reduce(ufunc, [pad] * dims[0])
    return out


def _reduce_padded(x: np.ndarray, win: Window, ufunc: np.ufunc, pad_value: float) -> np.ndarray:
    """`window_reduce` over a padded copy of x (`pad_to_windows`; none without padding)."""
    out = pad_to_windows(x, win, pad_value)
    n = len(win.kernel)
    for axis, (k, s, d, o) in enumerate(zip(win.kernel, win.strides, win.dilations, win.out)):
        lead = (slice(None),) * (out.ndim - n + axis)
        picks = [out[(*lead, slice(j * d, j * d + (o - 1) * s + 1, s))] for j in range(k)]
        acc = ufunc(picks[0], picks[1]) if k > 1 else picks[0].copy()  # a new array
        for values in picks[2:]:
            ufunc(acc, values, out=acc)
        out = acc
    return out


def _is_identity_pad(ufunc: np.ufunc, pad_value) -> bool:
    """Whether ufunc(pad_value, v) == v for every v: max with -inf, min with +inf, add
    with 0 (which only turns a -0.0 into 0.0)."""
    pad = float(pad_value) if np.ndim(pad_value) == 0 else None
    return (ufunc, pad) in ((np.maximum, -np.inf), (np.minimum, np.inf), (np.add, 0.0))


def empty_in_layout(shape: Sequence[int], like: np.ndarray) -> np.ndarray:
    """An uninitialised array of `shape` (as many axes as `like`) in `like`'s dtype, its axes
    laid out in memory in the order of `like`'s (a channels-last input gives a
    channels-last result): ufuncs between the two then walk both in one order."""
    if like.flags.c_contiguous or like.ndim < 2:
        return np.empty(shape, like.dtype)
    order = memory_order(like)
    return np.empty([shape[a] for a in order], like.dtype).transpose(np.argsort(order))


def axis_reduce(
    x: np.ndarray,
    axis: int,
    k: int,
    stride: int,
    dilation: int,
    begin: int,
    out_size: int,
    ufunc: np.ufunc,
    pad_value: float | np.ndarray,
) -> np.ndarray:
    """`ufunc` over the k taps of each of `out_size` windows along `axis`: window i, tap j
    reads x at i * stride + j * dilation - begin, and positions outside x read as
    `pad_value`. The taps combine in order j = 0, 1, ..., as over a padded copy of x (so
    the results are the same values), but each tap reads x in place: only the few
    windows that reach into the padding take the pad value, one scalar step each, or none
    where the pad value is the ufunc's identity."""
    size = x.shape[axis]
    lead = (slice(None),) * axis
    shape = x.shape[:axis] + (out_size,) + x.shape[axis + 1 :]
    taps = []  # (first window, end window, view of x) for the windows inside x
    for j in range(k):
        off = j * dilation - begin  # where window 0's tap j reads
        lo = min(out_size, max(0, -(off // stride)))
        hi = max(lo, min(out_size, (size - 1 - off) // stride + 1))
        first = lo * stride + off
        taps.append((lo, hi, x[(*lead, slice(first, first + (hi - lo - 1) * stride + 1, stride))]))

    def part(arr: np.ndarray, a: int, c: int) -> np.ndarray:
        return arr[(*lead, slice(a, c))]

    def read(tap, a: int, c: int):  # tap j over windows a..c, all inside x or all padding
        lo, hi, view = tap
        return part(view, a - lo, c - lo) if lo <= a and c <= hi else pad_value

    # where the pad value is the ufunc's identity (max with -inf, add with 0), a padded tap
    # leaves the value as it is, so the step is a copy or nothing at all
    identity = _is_identity_pad(ufunc, pad_value)
    acc = empty_in_layout(shape, x)
    pair = taps[:2]
    cuts = sorted({0, out_size, *(v for lo, hi, _ in pair for v in (lo, hi))})
    for a, c in zip(cuts, cuts[1:]):
        values = [read(tap, a, c) for tap in pair]
        if identity:
            values = [v for v in values if v is not pad_value] or [pad_value]
        if len(values) == 1:
            part(acc, a, c)[...] = values[0]
        else:
            ufunc(*values, out=part(acc, a, c))
    for lo, hi, view in taps[2:]:
        if hi > lo:
            ufunc(part(acc, lo, hi), view, out=part(acc, lo, hi))
        for a, c in ((0, lo), (hi, out_size)):
            if c > a and not identity:
                ufunc(part(acc, a, c), pad_value, out=part(acc, a, c))
    return acc


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to compute in: float16/bfloat16 widen to float32 (BLAS, accuracy)."""
    return np.dtype(np.float32) if dtype.itemsize < 4 and dtype.kind not in "iub" else dtype
