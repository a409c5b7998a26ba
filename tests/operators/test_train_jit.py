"""The numba WeightedSum and MomentumSGDUpdate passes against train.py's NumPy kernels (their
oracles): bit-identical results, in both thread modes."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import train_jit
from netbrew.testing import run_op

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba missing or NETBREW_JIT=0")


@pytest.fixture
def count(monkeypatch):
    """count(name) wraps train_jit.name and returns the list its calls append to."""

    def watch(name):
        calls, real = [], getattr(train_jit, name)
        monkeypatch.setattr(train_jit, name, lambda *a: calls.append(1) or real(*a))
        return calls

    return watch


@pytest.fixture(params=["parallel", "serial"])
def threads(request, monkeypatch):
    monkeypatch.setattr(
        train_jit, "PARALLEL_MIN_ELEMENTS", 0 if request.param == "parallel" else 1 << 40
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pairs", [1, 2, 3])
def test_weighted_sum_matches_numpy(pairs, dtype, threads, count):
    calls = count("weighted_sum")
    rng = np.random.default_rng(pairs)
    inputs = []
    for i in range(pairs):
        x = rng.standard_normal((7, 5, 3)).astype(dtype)
        x[0, 0, i] = -0.0  # a -0.0 product sums to +0.0, as from NumPy's zero start
        inputs += [x, np.array([rng.standard_normal()], np.float64 if i else dtype)]
    with jit.disabled():
        (want,) = run_op("WeightedSum", inputs)
    (got,) = run_op("WeightedSum", inputs)
    assert len(calls) == 1 and got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nesterov", [0, 1])
def test_momentum_sgd_update_matches_numpy(nesterov, dtype, threads, count):
    calls = count("momentum_sgd_update")
    rng = np.random.default_rng(nesterov)
    grad, moment, param = (rng.standard_normal((64, 3, 3, 3)).astype(dtype) for _ in range(3))
    lr = np.array([0.05], dtype)
    attrs = dict(momentum=0.9, nesterov=nesterov)
    with jit.disabled():
        want = run_op("MomentumSGDUpdate", [grad, moment, lr, param], outputs=3, **attrs)
    got = run_op("MomentumSGDUpdate", [grad, moment, lr, param], outputs=3, **attrs)
    assert len(calls) == 1
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, w)


def test_other_layouts_and_dtypes_keep_numpy():
    x = np.ones((4, 6), np.float32)
    assert train_jit.applies(x, x)
    assert train_jit.applies(x, x.T)  # another layout: copied to C order
    assert not train_jit.applies(x, x.astype(np.float64))  # mixed dtypes
    assert not train_jit.applies(x.astype(np.float16))
    (y,) = run_op("WeightedSum", [x.T, np.array([2.0], np.float32)])
    np.testing.assert_array_equal(y, 2 * x.T)
