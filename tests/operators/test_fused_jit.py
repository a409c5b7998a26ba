"""FusedElementwise's compiled loop against its NumPy kernel (the oracle), and its fallbacks."""

import numpy as np
import pytest

from netbrew import jit
from netbrew.operators import fused_jit
from netbrew.operators.fused_elementwise import ABSENT, RUNNING, _plan, fused_elementwise_cpu

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed or NETBREW_JIT=0")

ALL_STEPS = (  # every step type once, over x (input 0) and per-channel p (input 1)
    ["Mul", "Add", "Relu", "Sub", "Div", "Max", "Min", "Neg", "Abs", "Sqrt", "Log", "Exp"]
    + ["Reciprocal", "Tanh", "LeakyRelu", "Sigmoid", "HardSigmoid", "Sum", "Clip"],
    [0, 1, RUNNING, 1, RUNNING]
    + [RUNNING, 1, 1, RUNNING, RUNNING, 1, 1, RUNNING]
    + [RUNNING] * 10
    + [RUNNING, 0, RUNNING, 2, ABSENT],
    [0.3, 0.25, 0.4],
)


def _both(inputs, ops, slots, params=(), results=(), fits=True):
    """(the loop's outputs, run wherever it can; the NumPy kernel's). `fits`: whether the
    loop can run (else the kernel's NumPy fallback stands in for it)."""
    plan = _plan(tuple(ops), tuple(slots), tuple(params), len(inputs), tuple(results))
    got = fused_jit.run(inputs, plan, choose=False)
    with jit.disabled():
        want = fused_elementwise_cpu(*inputs, ops=ops, slots=slots, params=params, results=results)
    assert (got is not None) == fits
    got = got or want
    return (got, want) if results else (got[0], want[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "x_shape, p_shape",
    [
        ((2, 3, 5, 7), (3, 1, 1)),  # per channel, batch > 1
        ((1, 7, 9, 1), (1, 7, 1, 1)),
        ((4, 6), (6,)),  # per column
        ((5, 1, 3), (1, 4, 1)),  # both broadcast: Y grows to (5, 4, 3)
        ((3,), ()),
    ],
)
def test_every_step_matches_numpy(x_shape, p_shape, dtype):
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, x_shape).astype(dtype)
    p = rng.uniform(0.5, 2, p_shape).astype(dtype)
    hi = np.array(0.8, dtype)
    ops, slots, params = ALL_STEPS
    got, want = _both((x, p, hi), ops, slots, params)
    assert got.dtype == want.dtype and got.shape == want.shape
    eps = 8 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=eps, atol=eps)


def test_strided_and_channels_last_inputs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32).transpose(0, 3, 1, 2)  # NHWC
    a = rng.standard_normal((3, 1, 1)).astype(np.float32)
    b = rng.standard_normal((1, 3, 10, 1)).astype(np.float32)[:, :, ::2]  # strided
    got, want = _both((x, a, b), ["Mul", "Add", "Relu"], [0, 1, RUNNING, 2, RUNNING], fits=False)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_nan_and_inf_propagate_as_in_numpy():
    x = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 2.0, -2.0], np.float32)
    m = np.array([np.nan, 1.0, np.nan, -1.0, 0.0, np.nan, 1.0], np.float32)
    ops = ["Max", "Relu", "Min", "Div", "LeakyRelu", "Sigmoid"]
    slots = [0, 1, RUNNING, RUNNING, 1, RUNNING, 0, RUNNING, RUNNING]
    got, want = _both((x, m), ops, slots, [0.1])
    np.testing.assert_array_equal(got, want)


def test_merged_axes_merge_what_every_array_walks_alike():
    out = np.empty((2, 3, 4, 5), np.float32)
    per_channel = np.broadcast_to(np.ones((3, 1, 1), np.float32), out.shape)
    axes = fused_jit.merged_axes(out.shape, [out, per_channel])
    assert [n for n, _ in axes] == [2, 3, 20]


def test_falls_back_to_numpy_where_the_loop_does_not_fit():
    steps = _plan(("Add",), (0, 1), (), 2)
    x = np.ones((2, 3, 4, 5), np.float32)
    odd = np.ones((2, 1, 4, 1), np.float32)  # 4 axes left after merging

    def run(*inputs):
        return fused_jit.run(inputs, steps, choose=False)

    assert run(x, odd) is None
    assert run(x, np.ones((1, 3, 1, 5), np.float32)) is None
    assert run(x, x.astype(np.float64)) is None  # mixed dtypes
    assert run(x.astype(np.float16), x.astype(np.float16)) is None
    assert run(x, np.ones((3,), np.float32)) is None  # no broadcast
    assert run(x, x) is not None
    with jit.disabled():
        assert run(x, x) is None


def test_numpy_runs_where_it_is_faster():
    """The loop is chosen for steps without scalar libm calls, from MIN_SIZE elements."""
    add = _plan(("Add", "Relu"), (0, 1, RUNNING), (), 2)
    small = np.ones((4, 8), np.float32)
    big = np.ones((2, fused_jit.MIN_SIZE // 2), np.float32)
    assert fused_jit.run((small, small), add) is None
    assert fused_jit.run((small, small), add, choose=False) is not None
    assert fused_jit.run((big, big), add) is not None
    for op in sorted(fused_jit.TRANSCENDENTAL):
        plan = _plan(("Add", op), (0, 1, RUNNING), (), 2)
        assert fused_jit.run((big, big), plan) is None
        assert fused_jit.run((big, big), plan, choose=False) is not None


def test_generated_module_is_written_once_to_the_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("NETBREW_CACHE_DIR", str(tmp_path))
    steps = _plan(("Mul", "HardSigmoid"), (0, 0, RUNNING), (0.125, 0.5), 1)
    x = np.linspace(-4, 4, 33, dtype=np.float64)
    (y,) = fused_jit.run((x,), steps, choose=False)
    np.testing.assert_allclose(y, np.clip(x * x * 0.125 + 0.5, 0, 1))
    files = list((tmp_path / "fused").glob("chain_*.py"))
    assert len(files) == 1 and "0.125" in files[0].read_text()


# the LSTM cell update over (f, c, i, g, o): c2 = f * c + i * g, h2 = o * tanh(c2)
LSTM = (["Mul", "Mul", "Add", "Tanh", "Mul"], [0, 1, 2, 3, -3, RUNNING, RUNNING, 4, RUNNING])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape, c_shape",
    [((8, 64), (8, 64)), ((3, 7), (1, 7)), ((2, 5, 3, 3), (5, 1, 1)), ((1,), ())],
)
def test_dag_with_two_outputs_matches_numpy(shape, c_shape, dtype):
    rng = np.random.default_rng(5)
    f, i, g, o = (rng.uniform(-2, 2, shape).astype(dtype) for _ in range(4))
    c = rng.uniform(-2, 2, c_shape).astype(dtype)
    ops, slots = LSTM
    inputs = (f, c, i, g, o[..., ::-1])  # a reversed view: negative strides
    if len(shape) == 4:  # reversed o: 4 axes left after merging, the NumPy kernel runs
        assert fused_jit.run(inputs, _plan(tuple(ops), tuple(slots), (), 5), choose=False) is None
        inputs = (f, c, i, g, o)
    got, want = _both(inputs, ops, slots, results=[2, 4])
    eps = 8 * np.finfo(dtype).eps
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=eps, atol=eps)
    np.testing.assert_allclose(want[0], f * c + i * g, rtol=eps)


def test_dag_falls_back_where_outputs_or_bounds_do_not_fit_the_loop():
    x, w = np.ones((4, 1), np.float32), np.ones((4, 3), np.float32)
    two_shapes = _plan(("Sigmoid", "Mul"), (0, RUNNING, 1), (), 2, (0, 1))  # (4, 1), (4, 3)
    assert fused_jit.run((x, w), two_shapes, choose=False) is None
    narrower = _plan(("Sigmoid", "Mul", "Neg"), (0, RUNNING, 1, -3), (), 2, (2,))  # Neg: (4, 1)
    assert fused_jit.run((x, w), narrower, choose=False) is None
    step_bound = _plan(("Neg", "Clip"), (0, 0, -3, ABSENT), (), 1)  # bound = step 0: 4 values
    assert fused_jit.run((x,), step_bound, choose=False) is None
    with pytest.raises(Exception, match="expected a scalar"):
        fused_elementwise_cpu(x, ops=["Neg", "Clip"], slots=[0, 0, -3, ABSENT])
    one = np.full((1,), 0.5, np.float32)
    scalar_bound = _plan(("Neg", "Clip"), (1, 0, -3, ABSENT), (), 2)  # bound = -0.5
    (y,) = fused_jit.run((w, one), scalar_bound, choose=False)
    np.testing.assert_array_equal(y, np.maximum(w, -0.5))
