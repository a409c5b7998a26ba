"""DFT, STFT, the Blackman, Hamming and Hann windows, and MelWeightMatrix (ONNX signal ops).

Complex values live in a trailing axis: [..., 1] is real, [..., 2] is (real, imaginary).
Transforms run through numpy.fft in the input's precision (complex64 below float64, as
ONNX's reference does) and return the input's dtype. DFT and STFT are linear, and their
gradients (signal_grad.py) are the adjoint transforms; `dft_plan` and `stft_plan` check
the inputs for both.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.quantize import onnx_dtype
from netbrew.operators.schema import kernel, no_gradient, schema


def _scalar(arr: np.ndarray, slot: str, integer: bool = True) -> int | float:
    if arr.size != 1:
        raise ShapeError(f"input {slot} has shape {list(arr.shape)}, expected a scalar")
    if integer and arr.dtype.kind not in "iu":
        raise SchemaError(f"input {slot} has dtype {arr.dtype}, expected an integer type")
    value = arr.reshape(())[()]
    return int(value) if integer else float(value)


def _complex(x: np.ndarray, slot: str) -> np.ndarray:
    """x [..., 1 or 2] as a complex array [...] (complex128 for float64 x, else complex64)."""
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ShapeError(
            f"input {slot} has shape {list(x.shape)}, expected [..., 1] (real) or [..., 2] "
            "(real, imaginary)"
        )
    work = np.complex128 if x.dtype == np.float64 else np.complex64
    z = x[..., 0].astype(work)
    if x.shape[-1] == 2:
        z.imag = x[..., 1]
    return z


def _pack(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


schema(
    "DFT",
    inputs=["input", "dft_length?", "axis?"],
    outputs=["output"],
    attrs={"inverse": 0, "onesided": 0},
    doc="output[k] = sum_n input[n] exp(-2 pi j k n / N) along axis (default -2), N = dft_length "
    "(pads or truncates); inverse=1: exp(+...) / N; onesided=1: real input -> first N//2+1 "
    "bins (inverse: one-sided input -> real [..., 1] signal, N = 2 (m - 1) by default)",
)


def dft_plan(x: np.ndarray, dft_length, axis, inverse: int, onesided: int) -> tuple[int, int]:
    """(axis in [0, rank - 2], transform length N) of a DFT of `x` (shared with DFTGradient)."""
    rank = x.ndim
    ax = -2 if axis is None else _scalar(axis, "axis")
    if not (-rank <= ax <= -2 or 0 <= ax <= rank - 2):
        raise SchemaError(
            f"input axis={ax} is out of range for input of rank {rank}: expected [-{rank}, -2] "
            f"or [0, {rank - 2}] (the last axis holds real and imaginary parts)"
        )
    ax %= rank
    m = x.shape[ax]
    n = m if not (inverse and onesided) else 2 * (m - 1)
    if dft_length is not None:
        n = _scalar(dft_length, "dft_length")
    if n < 1:
        raise SchemaError(f"dft_length={n} must be >= 1")
    return ax, n


@kernel("DFT")
def dft_cpu(x, dft_length=None, axis=None, *, inverse=0, onesided=0):
    sig = _complex(x, "input")
    ax, n = dft_plan(x, dft_length, axis, inverse, onesided)
    if inverse and onesided:
        return (np.fft.irfft(sig, n, axis=ax)[..., None].astype(x.dtype),)
    if inverse:
        return (_pack(np.fft.ifft(sig, n, axis=ax), x.dtype),)
    out = np.fft.fft(sig, n, axis=ax)
    if onesided:
        out = out.take(np.arange(n // 2 + 1), axis=ax)
    return (_pack(out, x.dtype),)


schema(
    "STFT",
    inputs=["signal", "frame_step", "window?", "frame_length?"],
    outputs=["output"],
    attrs={"onesided": 1},
    doc="output[b, f, k] = DFT(signal[b, f*frame_step : f*frame_step + L] * window)[k]; "
    "signal (B, T, 1|2) -> (B, (T - L) // frame_step + 1, L//2+1 if onesided else L, 2); "
    "L = frame_length, else window's length, else T; onesided=1 (real signals only)",
)


def stft_plan(signal, frame_step, window, frame_length, onesided) -> tuple:
    """(complex signal (B, T), frame step, frame length) of an STFT, checked (shared with
    STFTGradient)."""
    if signal.ndim != 3:
        raise ShapeError(f"input signal has shape {list(signal.shape)}, expected 3 dims "
                         "[batch, signal_length, 1 or 2]")  # fmt: skip
    sig = _complex(signal, "signal")
    total = sig.shape[1]
    step = _scalar(frame_step, "frame_step")
    if window is not None and window.ndim != 1:
        raise ShapeError(f"input window has shape {list(window.shape)}, expected 1-D")
    length = total if window is None else window.shape[0]
    if frame_length is not None:
        length = _scalar(frame_length, "frame_length")
        if window is not None and window.shape[0] != length:
            raise ShapeError(f"input window has {window.shape[0]} values but frame_length={length}")
    if step < 1 or not 1 <= length <= total:
        raise ShapeError(
            f"frame_step={step} must be >= 1 and frame_length={length} in [1, {total}] "
            "(the signal length)"
        )
    if onesided and signal.shape[-1] == 2:
        raise SchemaError("onesided=1 needs a real signal [..., 1]; set onesided=0 for complex")
    return sig, step, length


@kernel("STFT")
def stft_cpu(signal, frame_step, window=None, frame_length=None, *, onesided=1):
    sig, step, length = stft_plan(signal, frame_step, window, frame_length, onesided)
    frames = sliding_window_view(sig, length, axis=1)[:, ::step]  # (B, F, L)
    if window is not None:
        frames = frames * window.astype(frames.real.dtype)
    out = np.fft.fft(frames, axis=-1)
    if onesided:
        out = out[..., : length // 2 + 1]
    return (_pack(out, signal.dtype),)


def _window(name: str, formula: str, coeffs: tuple[float, ...]) -> None:
    schema(
        name,
        inputs=["size"],
        outputs=["output"],
        attrs={"output_datatype": 1, "periodic": 1},
        doc=f"output[n] = {formula}, n in [0, size), N = size if periodic else size - 1; "
        "periodic=1, output_datatype=1 (float)",
    )

    @kernel(name)
    def window_cpu(size, *, output_datatype=1, periodic=1):
        count = _scalar(size, "size")
        check_numel([count], f"{name} output")
        dtype = onnx_dtype(output_datatype, "output_datatype")
        span = count if periodic else count - 1
        k = np.arange(count, dtype=np.float64)
        out = np.zeros(count)
        for i, c in enumerate(coeffs):
            out += c * np.cos(2 * np.pi * i * k / max(span, 1))
        return ((np.ones(count) if span == 0 else out).astype(dtype),)

    no_gradient(name, "a window is a constant table computed from an integer size")


_window("HannWindow", "0.5 - 0.5 cos(2 pi n / N)", (0.5, -0.5))
_window("HammingWindow", "25/46 - 21/46 cos(2 pi n / N)", (25 / 46, -21 / 46))
_window("BlackmanWindow", "0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)", (0.42, -0.5, 0.08))

schema(
    "MelWeightMatrix",
    inputs=["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"],
    outputs=["output"],
    attrs={"output_datatype": 1},
    doc="triangular filters, peak 1, evenly spaced on mel(f) = 2595 log10(1 + f/700) between "
    "the edge frequencies -> (dft_length // 2 + 1, num_mel_bins); output_datatype=1 (float)",
)


@kernel("MelWeightMatrix")
def mel_weight_matrix_cpu(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
                          upper_edge_hertz, *, output_datatype=1):  # fmt: skip
    bins, n_fft = _scalar(num_mel_bins, "num_mel_bins"), _scalar(dft_length, "dft_length")
    rate = _scalar(sample_rate, "sample_rate")
    low = _scalar(lower_edge_hertz, "lower_edge_hertz", integer=False)
    high = _scalar(upper_edge_hertz, "upper_edge_hertz", integer=False)
    if bins < 1 or n_fft < 1 or rate < 1 or not 0 <= low < high:
        raise SchemaError(
            f"MelWeightMatrix needs num_mel_bins={bins}, dft_length={n_fft}, sample_rate={rate} "
            f">= 1 and 0 <= lower_edge_hertz={low} < upper_edge_hertz={high}"
        )
    spec = n_fft // 2 + 1
    check_numel([spec, bins], "MelWeightMatrix output")
    mel_low, mel_high = (2595 * np.log10(1 + f / 700) for f in (low, high))
    mels = np.arange(bins + 2) * ((mel_high - mel_low) / (bins + 2)) + mel_low
    hz = 700 * (10 ** (mels / 2595) - 1)
    edge = np.floor_divide((n_fft + 1) * hz, rate).astype(np.int64)
    left, center, right = edge[:-2], edge[1:-1], edge[2:]
    j = np.arange(spec)[:, None]
    rise = np.where(center > left, (j - left) / np.maximum(center - left, 1), 1.0)
    fall = (right - j) / np.maximum(right - center, 1)
    out = np.where((j >= left) & (j <= center), rise, 0.0)
    out = np.where((j >= center) & (j < right), fall, out)
    return (out.astype(onnx_dtype(output_datatype, "output_datatype")),)


no_gradient("MelWeightMatrix", "a constant table computed from scalar parameters")
