"""Gradient of SwiGLU against central differences, and SwiGLUGradient's partial outputs."""

import numpy as np
import pytest

from netbrew.testing import check_gradient, rand, run_op


@pytest.mark.parametrize("alpha", [1.0, 1.702, -0.5])
@pytest.mark.parametrize("wrt", [[0], [1], [0, 1]])
def test_swiglu_gradient(alpha, wrt):
    a, b = rand(3, 4, low=-3, high=3), rand(3, 4, seed=1)
    check_gradient("SwiGLU", [a, b], wrt=wrt, alpha=alpha)


def test_swiglu_gradient_op_skips_unnamed_outputs():
    a, b, dy = rand(2, 3), rand(2, 3, seed=1), rand(2, 3, seed=2)
    (db,) = run_op("SwiGLUGradient", [a, b, dy], outputs=["", "db"])
    np.testing.assert_allclose(db, dy * a / (1 + np.exp(-a)), rtol=1e-5)
