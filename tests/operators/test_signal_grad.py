"""Gradients of DFT and STFT (the adjoint transforms) against central differences, and
against torch.fft / torch.stft autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.operators.signal_grad import overlap_add
from netbrew.testing import check_gradient, rand, run_op


def _int(v):
    return None if v is None else np.array(v, np.int64)


@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("parts", [1, 2], ids=["real", "complex"])
@pytest.mark.parametrize("dft_length", [None, 4, 9, 1], ids=["same", "trunc", "pad", "one"])
def test_dft_gradient(inverse, onesided, parts, dft_length):
    x = rand(2, 6, parts, seed=1)
    check_gradient(
        "DFT", [x, _int(dft_length)], wrt=0, inverse=inverse, onesided=onesided, max_points=24
    )


@pytest.mark.parametrize("inverse, onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("axis", [0, 1, -3])
def test_dft_gradient_axis(inverse, onesided, axis):
    x = rand(5, 4, 3, 2, seed=2)
    check_gradient(
        "DFT", [x, None, _int(axis)], wrt=0, inverse=inverse, onesided=onesided, max_points=40
    )


@pytest.mark.parametrize("parts, onesided", [(1, 1), (1, 0), (2, 0)])
@pytest.mark.parametrize(
    "step, length, window",
    [(3, 5, True), (2, 8, True), (4, 4, False), (1, 16, False), (5, 3, True)],
)
def test_stft_gradient(parts, onesided, step, length, window):
    signal = rand(2, 16, parts, seed=1)
    win = rand(length, seed=2, low=0.2) if window else None
    check_gradient(
        "STFT", [signal, _int(step), win, _int(length)], onesided=onesided, max_points=30
    )


def test_stft_gradient_without_frame_length():
    window = rand(6, seed=2)
    check_gradient("STFT", [rand(1, 11, 1, seed=1), _int(2), window], onesided=1)
    check_gradient("STFT", [rand(1, 7, 2, seed=1), _int(3)], onesided=0)


@pytest.mark.parametrize("step, length", [(3, 5), (2, 2), (4, 3), (1, 1)])
def test_overlap_add_is_the_adjoint_of_framing(step, length):
    rng = np.random.default_rng(0)
    signal = rng.normal(size=(2, 13))
    frames = np.lib.stride_tricks.sliding_window_view(signal, length, axis=1)[:, ::step]
    g = rng.normal(size=frames.shape)
    back = overlap_add(g, step, 13)
    np.testing.assert_allclose(np.sum(frames * g), np.sum(signal * back), rtol=1e-12)


def test_gradient_keeps_float32():
    x = rand(2, 6, 2)
    (dx,) = run_op("DFTGradient", [x, rand(2, 6, 2, seed=1)])
    assert dx.dtype == np.float32 and dx.shape == x.shape
    ds, dw = run_op("STFTGradient", [rand(1, 9, 1), _int(2), rand(1, 3, 3, 2), rand(5)], outputs=2)
    assert ds.dtype == dw.dtype == np.float32 and ds.shape == (1, 9, 1) and dw.shape == (5,)


def test_gradient_errors():
    with pytest.raises(OperatorError, match="expected \\[2, 4, 2\\]"):
        run_op("DFTGradient", [rand(2, 6, 1), rand(2, 6, 2), _int(6)], onesided=1)
    with pytest.raises(OperatorError, match="'window' is absent"):
        run_op("STFTGradient", [rand(1, 9, 1), _int(2), rand(1, 1, 5, 2)], outputs=2)
    with pytest.raises(OperatorError, match="expected \\[1, 3, 3, 2\\]"):
        run_op("STFTGradient", [rand(1, 9, 1), _int(2), rand(1, 3, 5, 2), rand(5)])


def test_gradient_op_wiring():
    op = op_def("DFT", ["x", "", "a"], ["y"], inverse=1)
    (grad,) = GRADIENTS["DFT"](op, ["dy"], ["dx", None, None])
    assert grad.type == "DFTGradient" and list(grad.input) == ["x", "dy", "", "a"]
    assert GRADIENTS["DFT"](op, ["dy"], [None, "dn", None]) == []
    op = op_def("STFT", ["s", "k", "w", "l"], ["y"], onesided=0)
    (grad,) = GRADIENTS["STFT"](op, ["dy"], [None, None, "dw", None])
    assert grad.type == "STFTGradient" and list(grad.input) == ["s", "k", "dy", "w", "l"]
    assert list(grad.output) == ["", "dw"]
    (grad,) = GRADIENTS["STFT"](op, ["dy"], ["ds", None, None, None])
    assert list(grad.output) == ["ds"]


def _torch_dft(torch, z, n, inverse, onesided, real):
    if inverse and onesided:
        return torch.fft.irfft(z, n, dim=1)[..., None]
    if inverse:
        return torch.view_as_real(torch.fft.ifft(z, n, dim=1).resolve_conj())
    if onesided:
        out = torch.fft.rfft(z, n, dim=1) if real else torch.fft.fft(z, n, dim=1)[:, : n // 2 + 1]
        return torch.view_as_real(out)
    return torch.view_as_real(torch.fft.fft(z, n, dim=1))


@pytest.mark.parametrize("inverse, onesided", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("parts", [1, 2], ids=["real", "complex"])
@pytest.mark.parametrize("n", [6, 4, 9])
def test_dft_matches_torch(inverse, onesided, parts, n):
    torch = pytest.importorskip("torch")
    x = rand(3, 6, 2, parts, seed=1, dtype=np.float64)
    xt = torch.tensor(x, requires_grad=True)
    z = xt[..., 0] if parts == 1 else torch.view_as_complex(xt)
    yt = _torch_dft(torch, z, n, inverse, onesided, parts == 1)
    dy = rand(*yt.shape, seed=3, dtype=np.float64)
    yt.backward(torch.tensor(dy))
    ins = [x, dy, _int(n), _int(1)]
    (dx,) = run_op("DFTGradient", ins, inverse=inverse, onesided=onesided)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("parts, onesided", [(1, 1), (1, 0), (2, 0)])
@pytest.mark.parametrize("step, length", [(3, 5), (2, 8)])
def test_stft_matches_torch(parts, onesided, step, length):
    torch = pytest.importorskip("torch")
    x = rand(2, 17, parts, seed=1, dtype=np.float64)
    window = rand(length, seed=2, dtype=np.float64)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(window, requires_grad=True)
    z = xt[..., 0] if parts == 1 else torch.view_as_complex(xt)
    yt = torch.stft(
        z, n_fft=length, hop_length=step, window=wt, center=False, onesided=bool(onesided),
        return_complex=True,
    )  # fmt: skip
    yt = torch.view_as_real(yt.transpose(1, 2))  # (B, frames, bins, 2), as ONNX's STFT
    dy = rand(*yt.shape, seed=3, dtype=np.float64)
    yt.backward(torch.tensor(dy))
    ds, dw = run_op(
        "STFTGradient", [x, _int(step), dy, window, _int(length)], outputs=2, onesided=onesided
    )
    np.testing.assert_allclose(ds, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-10, atol=1e-12)
