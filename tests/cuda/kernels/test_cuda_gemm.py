"""CUDA MatMul, Gemm, FC, their gradients and GemmRelu / FCRelu against the NumPy kernels,
through cuBLAS and through netbrew's own tiled GEMM (NETBREW_CUBLAS=0)."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import check_device, rand, run_op

TOL = {"atol": 1e-4, "rtol": 1e-4}
F16 = {"atol": 2e-2, "rtol": 2e-2}


@pytest.fixture(params=["cublas", "own"], autouse=True)
def backend(request, monkeypatch):
    """Every test runs on cuBLAS and on gemm.cu's tiled kernel."""
    if request.param == "own":
        monkeypatch.setenv("NETBREW_CUBLAS", "0")
    return request.param


def check_masked(op_type, inputs, names, tol=TOL, **attrs):
    """check_device with some outputs unnamed ("" in `names`: not computed)."""
    expected = run_op(op_type, inputs, outputs=names, **attrs)
    ws = Workspace()
    in_names = []
    for i, value in enumerate(inputs):
        in_names.append("" if value is None else f"in{i}")
        if value is not None:
            ws.feed_blob(f"in{i}", value, device="cuda:0")
    ws.run_operator_once(op_def(op_type, in_names, names, device="cuda:0", **attrs))
    got = [ws.fetch_blob(n) for n in names if n]
    for g, e, name in zip(got, expected, [n for n in names if n]):
        assert g.shape == e.shape and g.dtype == e.dtype, (name, g.shape, e.shape, g.dtype)
        np.testing.assert_allclose(g, e, err_msg=f"{op_type} {name}", **tol)


MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((1, 1), (1, 1)),
    ((17, 33), (33, 19)),  # odd sizes, past one 16x16 tile
    ((4,), (4,)),  # 1-D both: a scalar
    ((4,), (4, 3)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 5)),  # one B for the batch
    ((3, 4), (2, 4, 5)),  # one A for the batch
    ((3, 1, 2, 4), (1, 5, 4, 3)),  # batch dims broadcast both ways: an expanded copy
    ((2, 1, 3, 4), (2, 4, 2)),
    ((0, 3), (3, 4)),
    ((3, 0), (0, 4)),  # K = 0: zeros
    ((2, 0, 3, 4), (4, 2)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb):
    check_device("MatMul", [rand(*sa), rand(*sb, seed=1)], **TOL)


def test_matmul_float16():
    a, b = rand(2, 5, 7, dtype=np.float16), rand(7, 3, dtype=np.float16, seed=1)
    check_device("MatMul", [a, b], **F16)


def run_gpu(op_type, inputs, **attrs):
    """Runs the op on cuda:0 only (for its errors)."""
    run_op(op_type, inputs, device="cuda:0", **attrs)


def test_errors():
    with pytest.raises(OperatorError, match="MatMul: inner dims differ"):
        run_gpu("MatMul", [rand(3, 4), rand(5, 2)])
    with pytest.raises(OperatorError, match="MatMul: batch dims"):
        run_gpu("MatMul", [rand(2, 3, 4), rand(3, 4, 2)])
    ints = np.ones((2, 2), np.int32)
    with pytest.raises(OperatorError, match="MatMul: no CUDA kernel for dtype int32"):
        run_gpu("MatMul", [ints, ints])
    with pytest.raises(OperatorError, match="Gemm: input C has shape"):
        run_gpu("Gemm", [rand(2, 3), rand(3, 4), rand(3)])
    with pytest.raises(OperatorError, match="FC: input b has 2 elements"):
        run_gpu("FC", [rand(2, 3), rand(4, 3), rand(2)])


@pytest.mark.parametrize("sa,sb", [s for s in MATMUL_SHAPES if 0 not in s[0] + s[1]])
def test_matmul_gradient(sa, sb):
    a, b = rand(*sa), rand(*sb, seed=1)
    dy = run_op("MatMul", [a, b])[0]
    dy = rand(*dy.shape, seed=2) if dy.shape else np.float32(0.5)
    check_device("MatMulGradient", [a, b, dy], outputs=2, **TOL)


@pytest.mark.parametrize("names", [["dA", ""], ["", "dB"]])
def test_matmul_gradient_mask(names):
    a, b, dy = rand(2, 3, 4), rand(4, 5, seed=1), rand(2, 3, 5, seed=2)
    check_masked("MatMulGradient", [a, b, dy], names)


GEMM_CASES = [
    dict(),
    dict(transA=1),
    dict(transB=1),
    dict(transA=1, transB=1, alpha=0.5, beta=2.0),
    dict(alpha=-1.5, beta=0.0),
]
C_SHAPES = [None, (), (1,), (7,), (5, 1), (5, 7), (1, 7)]


@pytest.mark.parametrize("attrs", GEMM_CASES)
@pytest.mark.parametrize("c_shape", C_SHAPES)
def test_gemm(attrs, c_shape):
    m, k, n = 5, 9, 7
    a = rand(*((k, m) if attrs.get("transA") else (m, k)))
    b = rand(*((n, k) if attrs.get("transB") else (k, n)), seed=1)
    c = None if c_shape is None else rand(*c_shape, seed=2)
    check_device("Gemm", [a, b, c], **attrs, **TOL)


def test_gemm_large_and_float16():
    check_device("Gemm", [rand(70, 45), rand(45, 33, seed=1), rand(33, seed=2)], **TOL)
    a, b = rand(130, 300), rand(170, 300, seed=1)
    check_device("Gemm", [a, b, rand(170, seed=2)], transB=1, atol=1e-3, rtol=1e-4)
    a, b = rand(6, 10, dtype=np.float16), rand(10, 4, dtype=np.float16, seed=1)
    check_device("Gemm", [a, b, rand(4, dtype=np.float16, seed=2)], beta=0.5, **F16)


@pytest.mark.parametrize("attrs", GEMM_CASES)
@pytest.mark.parametrize("c_shape", [None, (1,), (7,), (5, 1), (5, 7)])
def test_gemm_gradient(attrs, c_shape):
    m, k, n = 5, 9, 7
    a = rand(*((k, m) if attrs.get("transA") else (m, k)))
    b = rand(*((n, k) if attrs.get("transB") else (k, n)), seed=1)
    dy = rand(m, n, seed=3)
    if c_shape is None:
        check_device("GemmGradient", [a, b, dy], outputs=2, **attrs, **TOL)
    else:
        c = rand(*c_shape, seed=2)
        check_device("GemmGradient", [a, b, dy, c], outputs=3, **attrs, **TOL)


def test_gemm_gradient_mask():
    a, b, dy, c = rand(4, 3), rand(3, 6, seed=1), rand(4, 6, seed=2), rand(6, seed=3)
    check_masked("GemmGradient", [a, b, dy, c], ["", "dB", "dC"], beta=0.5)
    check_masked("GemmGradient", [a, b, dy], ["dA", ""], transA=0, alpha=2.0)


FC_CASES = [
    ((4, 6), (5, 6), {}),
    ((1, 1), (1, 1), {}),
    ((3, 2, 4), (7, 8), {}),  # X flattened at axis 1
    ((2, 3, 4), (5, 4), {"axis": 2}),  # leading dims kept
    ((2, 3, 4), (5, 2, 2), {"axis": -1, "axis_w": 1}),
    ((6, 10), (3, 2, 10), {"axis_w": 2}),
    ((0, 5), (3, 5), {}),
    ((17, 31), (19, 31), {}),
]


@pytest.mark.parametrize("sx,sw,attrs", FC_CASES)
def test_fc(sx, sw, attrs):
    n = int(np.prod(sw[: attrs.get("axis_w", 1)]))
    check_device("FC", [rand(*sx), rand(*sw, seed=1), rand(n, seed=2)], **attrs, **TOL)


def test_fc_float16():
    x, w = rand(3, 8, dtype=np.float16), rand(4, 8, dtype=np.float16, seed=1)
    check_device("FC", [x, w, rand(4, dtype=np.float16, seed=2)], **F16)


@pytest.mark.parametrize("sx,sw,attrs", [c for c in FC_CASES if 0 not in c[0]])
def test_fc_gradient(sx, sw, attrs):
    x, w = rand(*sx), rand(*sw, seed=1)
    n = int(np.prod(sw[: attrs.get("axis_w", 1)]))
    dy = rand(*run_op("FC", [x, w, rand(n)], **attrs)[0].shape, seed=3)
    check_device("FCGradient", [x, w, dy, rand(n, seed=2)], outputs=3, **attrs, **TOL)
    check_device("FCGradient", [x, w, dy], outputs=3, **attrs, **TOL)  # db shaped (N,)


def test_fc_gradient_mask():
    x, w, dy = rand(4, 6), rand(5, 6, seed=1), rand(4, 5, seed=2)
    check_masked("FCGradient", [x, w, dy], ["dW", "", ""])
    check_masked("FCGradient", [x, w, dy], ["", "db", "dX"])


def test_fused_relu():
    a, b, c = rand(6, 5), rand(5, 7, seed=1), rand(7, seed=2)
    check_device("GemmRelu", [a, b, c], transB=0, **TOL)
    check_device("FCRelu", [rand(4, 5), rand(3, 5, seed=1), rand(3, seed=2)], **TOL)
