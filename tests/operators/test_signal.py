"""DFT, STFT, windows and MelWeightMatrix against direct sums and loops written here."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, rand


def dft_matrix(n_out, n_in, inverse=False):
    k, n = np.arange(n_out)[:, None], np.arange(n_in)[None, :]
    sign = 1 if inverse else -1
    return np.exp(sign * 2j * np.pi * k * n / max(n_out, n_in))


def direct_dft(z, n, axis, inverse=False):
    """sum_m z[m] e^{-+2 pi i k m / n} along axis, z zero-padded or cut to n."""
    z = np.moveaxis(z, axis, -1)
    m = z.shape[-1]
    z = np.concatenate([z, np.zeros((*z.shape[:-1], max(n - m, 0)))], -1)[..., :n]
    out = z @ dft_matrix(n, n, inverse).T / (n if inverse else 1)
    return np.moveaxis(out, -1, axis)


def to_complex(x):
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(complex)


def pack(z, dtype):
    return np.stack([z.real, z.imag], -1).astype(dtype)


# (input shape, dft_length, axis, inverse, onesided)
DFT_CASES = {
    "real_default_axis": ((2, 6, 1), None, None, 0, 0),
    "complex_axis1": ((3, 5, 4, 2), None, 1, 0, 0),
    "negative_axis_padded": ((3, 5, 4, 2), 7, -3, 0, 0),
    "truncated": ((2, 8, 1), 5, 1, 0, 0),
    "inverse": ((2, 6, 2), None, 1, 1, 0),
    "rfft_odd": ((4, 7, 1), None, 1, 0, 1),
    "rfft_axis0": ((6, 3, 1), 8, 0, 0, 1),
}


@pytest.mark.parametrize("case", DFT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dft(case, dtype):
    shape, length, axis, inverse, onesided = DFT_CASES[case]
    x = rand(*shape, dtype=dtype)
    ax = (-2 if axis is None else axis) % len(shape)
    n = length or shape[ax]

    def ref(x, *_):
        out = direct_dft(to_complex(x.astype(np.float64)), n, ax, bool(inverse))
        if onesided:
            out = np.take(out, np.arange(n // 2 + 1), axis=ax)
        return (pack(out, dtype),)

    inputs = [x, None if length is None else np.int64(length)]
    inputs += [] if axis is None else [np.array(axis, np.int64)]
    tol = 1e-4 if dtype == np.float32 else 1e-10
    check_op("DFT", inputs, ref, atol=tol, rtol=tol, inverse=inverse, onesided=onesided)


@pytest.mark.parametrize("n", [None, 10, 9])
def test_dft_irfft(n):
    x = rand(3, 6, 2, seed=2)

    def ref(x, *_):
        spec = to_complex(x.astype(np.float64))
        size = n or 2 * (6 - 1)
        full = np.zeros((3, size), complex)
        half = min(size // 2 + 1, 6)
        full[:, :half] = spec[:, :half]  # Hermitian completion of the one-sided spectrum
        full[:, size - np.arange(1, (size + 1) // 2)] = np.conj(spec[:, 1 : (size + 1) // 2])
        full[:, 0] = full[:, 0].real
        if size % 2 == 0:
            full[:, size // 2] = full[:, size // 2].real
        return (direct_dft(full, size, 1, inverse=True).real[..., None].astype(np.float32),)

    inputs = [x, None if n is None else np.int64(n), np.int64(1)]
    check_op("DFT", inputs, ref, atol=1e-5, inverse=1, onesided=1)


@pytest.mark.parametrize("window", [False, True])
@pytest.mark.parametrize("onesided", [0, 1])
def test_stft(window, onesided):
    signal, step, length = rand(2, 30, 1), 4, 8
    win = np.hanning(length).astype(np.float32) if window else None

    def ref(*_):
        frames = (30 - length) // step + 1
        out = []
        for f in range(frames):
            seg = signal[:, f * step : f * step + length, 0].astype(np.float64)
            seg = seg * (win if window else 1)
            spec = seg @ dft_matrix(length, length).T
            out.append(spec[:, : length // 2 + 1] if onesided else spec)
        return (pack(np.stack(out, 1), np.float32),)

    inputs = [signal, np.int64(step), win] + ([] if window else [np.int64(length)])
    check_op("STFT", inputs, ref, atol=1e-4, onesided=onesided)


def test_stft_complex_signal():
    signal = rand(1, 12, 2, seed=3)

    def ref(*_):
        z = to_complex(signal.astype(np.float64))
        frames = [z[:, f * 3 : f * 3 + 6] @ dft_matrix(6, 6).T for f in range(3)]
        return (pack(np.stack(frames, 1), np.float32),)

    check_op("STFT", [signal, np.int64(3), None, np.int64(6)], ref, atol=1e-4, onesided=0)


WINDOWS = {
    "HannWindow": lambda k, n: np.sin(np.pi * k / n) ** 2,
    "HammingWindow": lambda k, n: 25 / 46 - 21 / 46 * np.cos(2 * np.pi * k / n),
    "BlackmanWindow": lambda k, n: (
        0.42 - 0.5 * np.cos(2 * np.pi * k / n) + 0.08 * np.cos(4 * np.pi * k / n)
    ),
}


@pytest.mark.parametrize("op", WINDOWS)
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size, code, dtype", [(10, 1, np.float32), (7, 11, np.float64),
                                               (1, 1, np.float32), (0, 1, np.float32)])  # fmt: skip
def test_windows(op, periodic, size, code, dtype):
    def ref(size):
        k = np.arange(int(size))
        n = int(size) if periodic else int(size) - 1
        return (np.ones(size, dtype) if n <= 0 else WINDOWS[op](k, n).astype(dtype),)

    check_op(op, [np.int32(size)], ref, periodic=periodic, output_datatype=code)


def mel_ref(bins, n_fft, rate, low, high):
    """The loop of ONNX's MelWeightMatrix reference (mel points at i / (bins + 2))."""
    to_mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    step = (to_mel(high) - to_mel(low)) / (bins + 2)
    hz = [700 * (10 ** ((to_mel(low) + i * step) / 2595) - 1) for i in range(bins + 2)]
    edges = [int(((n_fft + 1) * f) // rate) for f in hz]
    out = np.zeros((n_fft // 2 + 1, bins))
    for i in range(bins):
        left, center, right = edges[i : i + 3]
        if center == left:
            out[center, i] = 1
        for j in range(left, center + 1):
            if center > left:
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return out


@pytest.mark.parametrize(
    "bins, n_fft, rate, low, high, code, dtype",
    [
        (8, 16, 8192, 0.0, 4096.0, 1, np.float32),
        (5, 64, 16000, 100.0, 7000.0, 11, np.float64),
        (3, 512, 22050, 20.0, 11025.0, 1, np.float32),
    ],  # fmt: skip
)
def test_mel_weight_matrix(bins, n_fft, rate, low, high, code, dtype):
    inputs = [np.int64(bins), np.int64(n_fft), np.int32(rate), np.float32(low), np.float32(high)]
    ref = mel_ref(bins, n_fft, rate, low, high).astype(dtype)
    check_op("MelWeightMatrix", inputs, lambda *a: (ref,), output_datatype=code)


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("DFT", [rand(2, 4, 3)], {}, r"\[\.\.\., 1\]"),
        ("DFT", [rand(2, 4, 1), None, np.int64(2)], {}, "out of range"),
        ("DFT", [rand(2, 4, 1), np.float32(4.0)], {}, "integer"),
        ("STFT", [rand(1, 10, 1), np.int64(2), rand(4), np.int64(5)], {}, "frame_length=5"),
        ("STFT", [rand(1, 10, 2), np.int64(2), rand(4)], {}, "onesided"),
        ("STFT", [rand(1, 10, 1), np.int64(2), None, np.int64(12)], {}, "frame_length=12"),
        ("HannWindow", [np.int64(-3)], {}, "negative"),
        (
            "MelWeightMatrix",
            [np.int64(4), np.int64(16), np.int64(8000), np.float32(500), np.float32(100)],
            {},
            "lower_edge",
        ),  # fmt: skip
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        check_op(op, inputs, lambda *a: (a[0],), **attrs)
