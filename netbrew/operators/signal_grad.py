"""Gradients of DFT and STFT: the adjoint transforms.

    DFT(input, dft_length?, axis?) -> output
        backward: DFTGradient(input, dY, dft_length?, axis?) -> dX
    STFT(signal, frame_step, window?, frame_length?) -> output
        backward: STFTGradient(signal, frame_step, dY, window?, frame_length?)
                  -> (dsignal, dwindow?)

A complex tensor is packed as (real, imaginary) in a trailing axis, and the loss pairs
each packed output with its gradient, so for a complex-linear Y = A X the gradient of the
packed X is the packed A^H dY (and its real part alone for a real input [..., 1]). The
transforms are numpy.fft calls:

- forward DFT, Y = S F P X (P pads or truncates to N, S keeps the first N // 2 + 1 bins
  when onesided): dX = P^T (N ifft(S^T dY)).
- inverse DFT, Y = F^H P X / N: dX = P^T fft(dY) / N.
- inverse onesided DFT, Y = irfft(X, N), real: irfft reads the first N // 2 + 1 bins, drops
  the imaginary parts of the DC and Nyquist bins and counts every other bin twice (its
  mirror), so dX = P^T (c * rfft(dY) / N) with c = 1 on DC and Nyquist, else 2.
- STFT, Y[b, f] = S F (window * frame_f(signal)): with D = L ifft(S^T dY) per frame,
  dsignal overlap-adds D * window back at the frames' offsets, and dwindow[l] = sum over
  frames of Re(conj(D) * frame)[l]. dft_length, axis, frame_step and frame_length are
  integers: no gradient.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError
from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, schema
from netbrew.operators.signal import _complex, _pack, dft_plan, stft_plan

schema(
    "DFTGradient",
    inputs=["input", "dY", "dft_length?", "axis?"],
    outputs=["dX"],
    attrs={"inverse": 0, "onesided": 0},
    dtypes={0: "float", 1: "float", 2: "int", 3: "int"},
    onnx=False,
    doc="dX = the adjoint DFT of dY along axis: N ifft (forward; onesided bins zero-padded "
    "to N), fft / N (inverse), c * rfft / N with c = 1 on DC and Nyquist else 2 (inverse "
    "onesided), truncated or zero-padded back to input's length; real part only for a "
    "real input [..., 1]; input, dft_length, axis and attributes as DFT, dY like its output",
)
schema(
    "STFTGradient",
    inputs=["signal", "frame_step", "dY", "window?", "frame_length?"],
    outputs=["dsignal", "dwindow?"],
    attrs={"onesided": 1},
    dtypes={0: "float", 1: "int", 2: "float", 3: "float", 4: "int"},
    onnx=False,
    output_mask=True,
    doc="with D = L ifft(dY) per frame (onesided bins zero-padded to L): dsignal = "
    "overlap-add of D * window at the frames' offsets (real part for a real signal), "
    "dwindow[l] = sum over frames of Re(conj(D) * frame)[l]; inputs and onesided=1 as STFT, "
    "dY like its output",
)


@gradient("DFT")
def dft_grad(op, g_out, g_in):
    if not g_in[0]:
        return []  # dft_length and axis are integers
    ins = [op.input[0], g_out[0], *op.input[1:]]
    return [op_def("DFTGradient", ins, [g_in[0]], **copy_attrs(op))]


@gradient("STFT")
def stft_grad(op, g_out, g_in):
    wanted = [g_in[0] or "", (g_in[2] or "") if len(g_in) > 2 else ""]
    if not any(wanted):
        return []  # frame_step and frame_length are integers
    if not wanted[1]:
        wanted.pop()
    ins = [op.input[0], op.input[1], g_out[0], *op.input[2:]]
    return [op_def("STFTGradient", ins, wanted, **copy_attrs(op))]


def _fit(z: np.ndarray, length: int, axis: int) -> np.ndarray:
    """z truncated or zero-padded to `length` along axis (P^T of a pad or truncation)."""
    have = z.shape[axis]
    if have >= length:
        return z.take(np.arange(length), axis=axis)
    pad = [(0, 0)] * z.ndim
    pad[axis] = (0, length - have)
    return np.pad(z, pad)


def _unpack(x: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """The packed gradient of x ([..., 1] real or [..., 2] complex) from complex dz."""
    if x.shape[-1] == 1:
        return dz.real[..., None].astype(x.dtype)
    return _pack(dz, x.dtype)


def _irfft_adjoint(g: np.ndarray, n: int, axis: int) -> np.ndarray:
    """A^H g for A = numpy.fft.irfft(., n, axis) as a real-linear map of its first
    n // 2 + 1 bins (g real, length n along axis)."""
    d = np.fft.rfft(g, n, axis=axis) / n
    twice = np.full(d.shape[axis], 2.0)
    twice[0] = 1.0
    if n % 2 == 0:
        twice[-1] = 1.0  # the Nyquist bin has no mirror
    return d * twice.reshape((-1,) + (1,) * (d.ndim - axis - 1))


@kernel("DFTGradient")
def dft_gradient_cpu(
    x: np.ndarray,
    dy: np.ndarray,
    dft_length: np.ndarray | None = None,
    axis: np.ndarray | None = None,
    *,
    inverse: int = 0,
    onesided: int = 0,
) -> tuple[np.ndarray]:
    sig = _complex(x, "input")
    ax, n = dft_plan(x, dft_length, axis, inverse, onesided)
    m = x.shape[ax]
    if inverse and onesided:
        check_grad_shape(dy, (*x.shape[:ax], n, *x.shape[ax + 1 : -1], 1), "DFT's output")
        g = dy[..., 0].astype(sig.real.dtype)
        return (_unpack(x, _fit(_irfft_adjoint(g, n, ax), m, ax)),)
    bins = n // 2 + 1 if onesided and not inverse else n
    check_grad_shape(dy, (*x.shape[:ax], bins, *x.shape[ax + 1 : -1], 2), "DFT's output")
    g = _complex(dy, "dY").astype(sig.dtype, copy=False)
    if inverse:
        dz = np.fft.fft(g, n, axis=ax) / n
    else:
        dz = np.fft.ifft(_fit(g, n, ax), n, axis=ax) * n  # S^T: zero the dropped bins
    return (_unpack(x, _fit(dz, m, ax)),)


def overlap_add(frames: np.ndarray, step: int, total: int) -> np.ndarray:
    """The adjoint of framing: frames (B, F, L), frame f taken from samples [f * step,
    f * step + L), summed back into a (B, total) signal, one strided add per block of
    `step` samples of the frame (L / step adds, none per frame)."""
    batch, count, length = frames.shape
    out = np.zeros((batch, length + count * step), frames.dtype)
    for j in range(0, length, step):
        block = frames[:, :, j : j + step]
        if block.shape[2] < step:
            block = np.pad(block, [(0, 0), (0, 0), (0, step - block.shape[2])])
        out[:, j : j + count * step] += block.reshape(batch, count * step)
    return out[:, :total]


@kernel("STFTGradient")
def stft_gradient_cpu(
    signal: np.ndarray,
    frame_step: np.ndarray,
    dy: np.ndarray,
    window: np.ndarray | None = None,
    frame_length: np.ndarray | None = None,
    *,
    onesided: int = 1,
    output_mask: tuple[bool, ...],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    sig, step, length = stft_plan(signal, frame_step, window, frame_length, onesided)
    count = (sig.shape[1] - length) // step + 1
    bins = length // 2 + 1 if onesided else length
    check_grad_shape(dy, (sig.shape[0], count, bins, 2), "STFT's output")
    g = _fit(_complex(dy, "dY").astype(sig.dtype, copy=False), length, 2)
    d = np.fft.ifft(g, axis=-1) * length  # (B, F, L): the gradient of the windowed frames
    dsignal = dwindow = None
    if output_mask[0]:
        w = 1 if window is None else window.astype(sig.real.dtype)
        dsignal = _unpack(signal, overlap_add(d * w, step, sig.shape[1]))
    if len(output_mask) > 1 and output_mask[1]:
        if window is None:
            raise SchemaError("output 'dwindow' is named but input 'window' is absent")
        frames = np.lib.stride_tricks.sliding_window_view(sig, length, axis=1)[:, ::step]
        dwindow = (d.real * frames.real + d.imag * frames.imag).sum(axis=(0, 1))
        dwindow = dwindow.astype(window.dtype)
    return dsignal, dwindow
