"""Erf and Gelu through their numba kernels (erf_jit) against the NumPy kernels, the oracle."""

import math

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import erf_jit
from netbrew.testing import rand, run_op

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba off (NETBREW_JIT=0 or missing)")

SPECIAL = [-np.inf, -40.0, -4.5, -4.0, -1e-3, -0.0, 0.0, 1e-30, 0.5, 3.99, 4.0, 9.0, np.inf, np.nan]
# float32: the clamped rational approximation, at most 4.2e-7 from erf (a few ulps near 1)
TOL = {np.float32: 5e-7, np.float64: 1e-14}


def numpy_path(op: str, x: np.ndarray) -> np.ndarray:
    with jit.disabled(), np.errstate(invalid="ignore"):  # Gelu(-inf) = -inf * 0 = NaN, as numba's
        return run_op(op, [x])[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0, 3), (1,), (7,), (3, 5, 11), (2, 128, 31)])
@pytest.mark.parametrize("op", ["Erf", "Gelu"])
def test_matches_numpy_kernel(op, shape, dtype):
    x = rand(*shape, dtype=np.float64, low=-6.0, high=6.0, seed=len(shape)).astype(dtype)
    (got,) = run_op(op, [x])
    want = numpy_path(op, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = np.maximum(np.abs(x), 1.0) if op == "Gelu" else 1.0  # Gelu multiplies by x
    assert np.all(np.abs(got - want) <= TOL[dtype] * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["Erf", "Gelu"])
def test_special_values_and_strided_input(op, dtype):
    x = np.array(SPECIAL, dtype)
    (got,) = run_op(op, [x])
    want = numpy_path(op, x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype] * 10)
    strided = rand(6, 10, dtype=dtype, low=-3, high=3)[:, ::3].T  # neither C nor F order
    np.testing.assert_allclose(run_op(op, [strided])[0], numpy_path(op, strided), atol=1e-6)


def test_float32_error_bound_on_a_dense_grid():
    """The documented bound: at most 4.2e-7 from float64 erf, over and past the clamp."""
    x = np.linspace(-6, 6, 200_001, dtype=np.float32)
    exact = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert np.abs(erf_jit.erf(x) - exact).max() <= 4.2e-7
    tiny = np.array([1e-20, -1e-12, 1e-7], np.float32)  # relative accuracy near 0
    np.testing.assert_allclose(erf_jit.erf(tiny), tiny * (2 / math.sqrt(math.pi)), rtol=1e-6)


def test_float64_gelu_keeps_the_negative_tail():
    x = np.array([-30.0, -10.0, -5.0])
    exact = 0.5 * x * np.array([math.erfc(-v / math.sqrt(2)) for v in x])
    np.testing.assert_allclose(erf_jit.gelu(x), exact, rtol=1e-13, atol=0)


def test_other_dtypes_and_jit_off_fall_back_to_numpy():
    assert erf_jit.erf(np.ones(3, np.float16)) is None
    with jit.disabled():
        assert erf_jit.gelu(np.ones(3, np.float32)) is None
    (half,) = run_op("Erf", [np.array([0.5, -1.0], np.float16)])
    np.testing.assert_allclose(half, [math.erf(0.5), math.erf(-1.0)], rtol=1e-3)
