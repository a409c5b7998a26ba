"""Ceil, Floor, Round, Sign, Sin ... Atanh, Erf and Mod against Python's math module; Mod's
gradient against central differences and torch's autograd."""

import math

import ml_dtypes
import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, check_op, rand, run_op

FLOATS = [np.float32, np.float64, np.float16]


def python_round(v):
    """Round half to even (Python's round), with inf and NaN passed through."""
    return v if not math.isfinite(v) else float(round(v))


def domain_acosh(v):
    return math.acosh(v) if v >= 1 else math.nan


def domain_atanh(v):
    if abs(v) == 1:
        return math.copysign(math.inf, v)
    return math.atanh(v) if abs(v) < 1 else math.nan


def domain(fn, low, high):
    return lambda v: fn(v) if low <= v <= high else math.nan


# op -> (scalar reference on Python floats, input range)
REFERENCES = {
    "Ceil": (math.ceil, (-5, 5)),
    "Floor": (math.floor, (-5, 5)),
    "Round": (python_round, (-5, 5)),
    "Sign": (lambda v: (v > 0) - (v < 0), (-5, 5)),
    "Sin": (math.sin, (-6, 6)),
    "Cos": (math.cos, (-6, 6)),
    "Tan": (math.tan, (-1.4, 1.4)),
    "Asin": (domain(math.asin, -1, 1), (-1.2, 1.2)),
    "Acos": (domain(math.acos, -1, 1), (-1.2, 1.2)),
    "Atan": (math.atan, (-10, 10)),
    "Sinh": (math.sinh, (-5, 5)),
    "Cosh": (math.cosh, (-5, 5)),
    "Asinh": (math.asinh, (-10, 10)),
    "Acosh": (domain_acosh, (0.5, 10)),
    "Atanh": (domain_atanh, (-1.1, 1.1)),
    "Erf": (math.erf, (-4, 4)),
}


def elementwise(fn, x, dtype):
    flat = [fn(float(v)) for v in np.asarray(x, np.float64).ravel()]
    return np.array(flat, np.float64).reshape(x.shape).astype(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4)])
@pytest.mark.parametrize("op", sorted(REFERENCES))
def test_unary(op, shape, dtype):
    fn, (low, high) = REFERENCES[op]
    x = rand(*shape, dtype=np.float64, low=low, high=high).astype(dtype)
    tol = {np.float16: 1e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    check_op(op, [x], reference=lambda x: (elementwise(fn, x, dtype),), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Ceil", "Floor", "Round", "Sign", "Sin", "Erf"])
def test_bfloat16(op):
    fn = REFERENCES[op][0]
    x = np.array([-2.5, -1.25, -0.5, 0, 0.5, 1.5, 2.5, 3.75], ml_dtypes.bfloat16)
    expected = elementwise(fn, x, ml_dtypes.bfloat16)
    (got,) = run_op(op, [x])
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), rtol=1e-2)


def test_special_values():
    x = np.array([-np.inf, -0.5, 0.5, 1.5, 2.5, np.inf, np.nan], np.float32)
    check_op("Round", [x], reference=lambda x: (np.array([-np.inf, -0, 0, 2, 2, np.inf, np.nan],
                                                         np.float32),))  # fmt: skip
    check_op("Sign", [x], reference=lambda x: (np.array([-1, -1, 1, 1, 1, 1, np.nan],
                                                        np.float32),))  # fmt: skip
    check_op("Erf", [x], reference=lambda x: (elementwise(math.erf, x, np.float32),))
    tiny = np.array([1e-300, -1e-20, 1e-8], np.float64)
    check_op("Erf", [tiny], reference=lambda x: (x * 2 / math.sqrt(math.pi),), rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_sign_int(dtype):
    x = np.arange(-4, 4).astype(dtype)
    check_op("Sign", [x], reference=lambda x: (elementwise(REFERENCES["Sign"][0], x, dtype),))


def mod_reference(a, b, fmod):
    a, b = np.broadcast_arrays(a, b)
    if a.dtype.kind in "iu":
        pairs = zip(a.ravel().tolist(), b.ravel().tolist())
        out = [int(math.fmod(x, y)) if fmod else x % y for x, y in pairs]
        return np.array(out, a.dtype).reshape(a.shape)
    pairs = zip(a.astype(np.float64).ravel().tolist(), b.astype(np.float64).ravel().tolist())
    out = [math.fmod(x, y) if fmod else _py_mod(x, y) for x, y in pairs]
    return np.array(out, np.float64).reshape(a.shape).astype(a.dtype)


def _py_mod(x, y):
    if y == 0 or math.isinf(x) or math.isnan(x) or math.isnan(y):
        return math.nan
    return x % y


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64] + FLOATS)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((5,), ())])
def test_mod(shapes, dtype, fmod):
    rng = np.random.default_rng(0)
    low = 0 if np.dtype(dtype).kind == "u" else -20
    a = rng.integers(low, 20, size=shapes[0]).astype(dtype)
    b = rng.integers(1, 7, size=shapes[1]) * (1 if low == 0 else rng.choice([-1, 1], shapes[1]))
    b = b.astype(dtype)
    if np.dtype(dtype).kind == "f":
        a = (a + rand(*shapes[0], dtype=np.float64)).astype(dtype)
    tol = 1e-3 if dtype == np.float16 else 1e-6
    check_op("Mod", [a, b], reference=lambda a, b: (mod_reference(a, b, fmod),), fmod=fmod,
             rtol=tol, atol=tol)  # fmt: skip


def test_mod_float_special_cases():
    a = np.array([0.0, -0.0, np.inf, 3.0, 1.0, 1.0, -1.0, np.nan, 5.0], np.float32)
    b = np.array([-2.0, 3.0, 2.0, 0.0, np.inf, -np.inf, np.inf, 1.0, np.nan], np.float32)
    (got,) = run_op("Mod", [a, b])
    want = np.array([-0.0, 0.0, np.nan, np.nan, 1.0, -np.inf, np.inf, np.nan, np.nan], np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[:2]), [True, False])  # zero takes B's sign
    (got,) = run_op("Mod", [a, b], fmod=1)
    np.testing.assert_array_equal(got[4:7], [1.0, 1.0, -1.0])


def test_errors():
    with pytest.raises(OperatorError, match="integer modulo by zero"):
        run_op("Mod", [np.ones(3, np.int32), np.array([1, 0, 2], np.int32)])
    with pytest.raises(OperatorError, match="'fmod' is 2, expected 0 or 1"):
        run_op("Mod", [rand(3), rand(3)], fmod=2)
    with pytest.raises(OperatorError, match="'input' has dtype int32, expected a float type"):
        run_op("Sin", [np.ones(3, np.int32)])
    with pytest.raises(OperatorError, match="'X' has dtype bool, expected a float type"):
        run_op("Floor", [np.ones(3, bool)])


@pytest.mark.parametrize("op", ["Ceil", "Floor", "Round", "Sign"])
def test_no_gradient(op):
    assert isinstance(GRADIENTS[op], NoGradient)


MOD_SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((4,), (2, 3, 4)), ((3, 1), (1, 4)), ((5,), ())]


def mod_operands(shape_a, shape_b):
    """Float64 A in [-6, 6) and B with |B| in [0.5, 2), both signs, drawn until every A / B
    (broadcast) is at least 0.05 from an integer: Mod jumps there, and the central
    differences of check_gradient (steps of 1e-3 move A / B by under 0.03) must not cross."""
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        a = rng.uniform(-6, 6, shape_a)
        b = rng.uniform(0.5, 2, shape_b) * rng.choice([-1.0, 1.0], shape_b)
        ratio = a / b
        if np.all(np.abs(ratio - np.round(ratio)) > 0.05) and (a < 0).any() and (a > 0).any():
            return a, b
    raise AssertionError(f"no operands for shapes {shape_a} and {shape_b}")


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("shapes", MOD_SHAPES)
def test_mod_gradient(shapes, fmod):
    check_gradient("Mod", list(mod_operands(*shapes)), fmod=fmod)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("shapes", MOD_SHAPES)
def test_mod_gradient_matches_torch(shapes, fmod):
    torch = pytest.importorskip("torch")
    a, b = mod_operands(*shapes)
    dc = rand(*np.broadcast_shapes(a.shape, b.shape), dtype=np.float64, seed=7)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    tc = torch.fmod(ta, tb) if fmod else torch.remainder(ta, tb)
    tc.backward(torch.tensor(dc))
    (c,) = run_op("Mod", [a, b], fmod=fmod)
    np.testing.assert_allclose(c, tc.detach().numpy(), atol=1e-12)
    da, db = run_op("ModGradient", [a, b, dc], outputs=2, fmod=fmod)
    np.testing.assert_allclose(da, ta.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(db, tb.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_gradient_uses_the_quotient_of_the_forward(fmod):
    # 1 / 0.1 rounds to 10.0, but 1 = 9 * 0.1 + 0.0999...: Mod's quotient is 9, so dC/dB = -9.
    a, b, one = np.array([1.0]), np.array([0.1]), np.ones(1)
    (c,) = run_op("Mod", [a, b], fmod=fmod)
    np.testing.assert_allclose(c, [0.1], rtol=1e-9)
    assert np.floor(a / b)[0] == 10
    (db,) = run_op("ModGradient", [a, b, one], outputs=["", "db"], fmod=fmod)
    np.testing.assert_array_equal(db, [-9.0])
    # everywhere: C = A - q * B with q = -dB / dC, both signs and both conventions
    rng = np.random.default_rng(1)
    a = rng.uniform(-100, 100, 2000)
    b = rng.uniform(0.01, 10, 2000) * rng.choice([-1.0, 1.0], 2000)
    (c,) = run_op("Mod", [a, b], fmod=fmod)
    (db,) = run_op("ModGradient", [a, b, np.ones(2000)], outputs=["", "db"], fmod=fmod)
    np.testing.assert_allclose(a + db * b, c, atol=1e-9)
    want = np.floor(a / b) if fmod == 0 else np.trunc(a / b)
    assert np.count_nonzero(-db != want) <= 2  # at most a jump's rounding differs


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16])
def test_mod_gradient_keeps_input_dtypes(dtype):
    a = np.array([[5.5, -5.5], [2.25, -7.0]], dtype)
    b = np.array([2.0, -3.0], dtype)
    da, db = run_op("ModGradient", [a, b, np.ones((2, 2), dtype)], outputs=2)
    assert da.dtype == dtype and db.dtype == dtype
    np.testing.assert_array_equal(da.astype(np.float32), np.ones((2, 2)))
    # floor: 5.5/2 -> 2, 2.25/2 -> 1; -5.5/-3 -> 1, -7/-3 -> 2
    np.testing.assert_array_equal(db.astype(np.float32), [-3.0, -3.0])


def test_mod_gradient_of_integers_is_zero():
    a = np.array([7, -7, 9], np.int32)
    b = np.array([2, 3, -4], np.int32)
    da, db = run_op("ModGradient", [a, b, np.ones(3, np.int32)], outputs=2)
    assert da.dtype == np.int32 and db.dtype == np.int32
    np.testing.assert_array_equal(da, [0, 0, 0])
    np.testing.assert_array_equal(db, [0, 0, 0])


def test_mod_maker_asks_only_for_the_wanted_gradients():
    fwd = op_def("Mod", ["a", "b"], ["c"], fmod=1)
    (grad_op,) = GRADIENTS["Mod"](fwd, ["dc"], [None, "db"])
    assert grad_op.type == "ModGradient"
    assert list(grad_op.input) == ["a", "b", "dc"] and list(grad_op.output) == ["", "db"]
    assert [(arg.name, arg.i) for arg in grad_op.arg] == [("fmod", 1)]


def test_mod_backward_through_autodiff():
    net = Net("mod")
    net.Mod(["a", "b"], "c", fmod=1)
    net.ReduceSum(["c"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"])
    a = np.array([[7.5, -7.5, 2.5], [1.25, -0.5, 8.0]])
    b = np.array([2.0, 2.0, -1.5])
    ws = Workspace()
    ws.feed_blob("a", a)
    ws.feed_blob("b", b)
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob(grads["a"]), np.ones((2, 3)))
    # trunc(A / B): [3, -3, -1] and [0, 0, -5], summed over the broadcast rows and negated
    np.testing.assert_array_equal(ws.fetch_blob(grads["b"]), [-3.0, 3.0, 6.0])


def test_mod_gradient_errors():
    with pytest.raises(OperatorError, match=r"'dC' has shape \[3\], expected \[2, 3\]"):
        run_op("ModGradient", [rand(2, 3), rand(3), rand(3)], outputs=2)
    with pytest.raises(OperatorError, match="ModGradient: argument 'fmod' is 3, expected 0 or 1"):
        run_op("ModGradient", [rand(3), rand(3), rand(3)], outputs=2, fmod=3)
