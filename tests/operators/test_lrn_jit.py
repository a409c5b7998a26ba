"""The numba LRN kernels (channel planes and channels-last) against the NumPy kernel."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators.normalization_extra import lrn_cpu

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

SHAPES = [(2, 7, 5, 9), (1, 3, 600), (3, 1, 2, 2), (2, 6, 3, 4, 5), (4, 9)]


@pytest.mark.parametrize("layout", ["planes", "channels_last"])
@pytest.mark.parametrize("size", [1, 2, 5, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_lrn_matches_numpy(shape, dtype, size, layout):
    rng = np.random.default_rng(sum(shape) + size)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    if layout == "channels_last":
        x = np.moveaxis(np.ascontiguousarray(np.moveaxis(x, 1, -1)), -1, 1)
    attrs = dict(alpha=0.3, beta=0.75, bias=1.5, size=size)
    got = lrn_cpu(x, **attrs)[0]
    with jit.disabled():
        want = lrn_cpu(x, **attrs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_lrn_other_beta_and_strided_inputs_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    cases = [(x, 0.6), (x[:, ::2], 0.75), (x.transpose(0, 1, 3, 2), 0.75)]
    for xs, beta in cases:
        got = lrn_cpu(xs, alpha=1e-2, beta=beta, bias=1.0, size=3)[0]
        with jit.disabled():
            want = lrn_cpu(xs, alpha=1e-2, beta=beta, bias=1.0, size=3)[0]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
