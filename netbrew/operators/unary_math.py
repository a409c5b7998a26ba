"""Elementwise math: Ceil, Floor, Round, Sign, the trigonometric and hyperbolic functions and
their inverses (Sin ... Atanh), Erf, and Mod.

Float ops keep the input's dtype; bfloat16 is computed in float32 and rounded back. Erf
reuses Cody's rational approximations from netbrew.operators.activations; float32 and
float64 run the numba kernel of erf_jit instead (14-20 ms down to 0.1-0.2 ms on BERT's
GELU). Gradients of the differentiable unary ones are in unary_math_grad; Mod's
(ModGradient) is here, next to its forward kernel, whose quotient it must reproduce.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators import erf_jit
from netbrew.operators.activations import _A, _B, _erfc_large, _ratio
from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, no_gradient, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

_NATIVE = (np.float16, np.float32, np.float64)


def is_float(dtype: np.dtype) -> bool:
    """float16/32/64, and bfloat16 and the float8 types (ml_dtypes, kind 'V')."""
    return dtype.kind == "f" or dtype.name.startswith(("bfloat", "float"))


def check_float(x: np.ndarray, slot: str) -> None:
    if not is_float(x.dtype):
        raise SchemaError(f"input {slot!r} has dtype {x.dtype}, expected a float type")


def check_real(x: np.ndarray, slot: str) -> None:
    if x.dtype.kind not in "iu" and not is_float(x.dtype):
        raise SchemaError(f"input {slot!r} has dtype {x.dtype}, expected an integer or float type")


def float_apply(fn: Callable[..., np.ndarray], *xs: np.ndarray) -> np.ndarray:
    """fn(*xs) in the first input's float dtype; types NumPy lacks go through float32."""
    dtype = xs[0].dtype
    with np.errstate(all="ignore"):
        if dtype in _NATIVE:
            return np.asarray(fn(*xs)).astype(dtype, copy=False)
        return np.asarray(fn(*(x.astype(np.float32) for x in xs))).astype(dtype)


def erf(x: np.ndarray) -> np.ndarray:
    """erf(x) in float64, accurate to about 1e-16 (Cody's approximations; NaN stays NaN)."""
    z = np.asarray(x, dtype=np.float64)
    y = np.abs(z)
    out = np.empty_like(z)
    small = y <= 0.46875
    zs = z[small]
    out[small] = zs * _ratio(_A, _B, zs * zs)
    big = ~small
    tail = _erfc_large(y[big])
    out[big] = np.where(z[big] > 0, 1.0 - tail, tail - 1.0)
    return out


def erf_any(x: np.ndarray) -> np.ndarray:
    """erf(x): the numba kernel for float32 and float64 (erf_jit), else `erf` in float64."""
    fast = erf_jit.erf(x)
    return erf(x) if fast is None else fast


# name -> (NumPy function, formula, float only); slots "X"/"Y" for the rounding ops as in ONNX
UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str, bool]] = {
    "Ceil": (np.ceil, "ceil(X)", True),
    "Floor": (np.floor, "floor(X)", True),
    "Round": (np.round, "round(X), halves to even", True),
    "Sign": (np.sign, "sign(input): -1, 0 or 1 (NaN stays NaN)", False),
    "Sin": (np.sin, "sin(input)", True),
    "Cos": (np.cos, "cos(input)", True),
    "Tan": (np.tan, "tan(input)", True),
    "Asin": (np.arcsin, "asin(input), NaN outside [-1, 1]", True),
    "Acos": (np.arccos, "acos(input), NaN outside [-1, 1]", True),
    "Atan": (np.arctan, "atan(input)", True),
    "Sinh": (np.sinh, "sinh(input)", True),
    "Cosh": (np.cosh, "cosh(input)", True),
    "Asinh": (np.arcsinh, "asinh(input)", True),
    "Acosh": (np.arccosh, "acosh(input), NaN below 1", True),
    "Atanh": (np.arctanh, "atanh(input), +-inf at +-1, NaN outside", True),
    "Erf": (erf_any, "erf(input)", True),
}
_XY = ("Ceil", "Floor", "Round")
NOT_DIFFERENTIABLE = {
    "Ceil": "piecewise constant: zero gradient almost everywhere",
    "Floor": "piecewise constant: zero gradient almost everywhere",
    "Round": "piecewise constant: zero gradient almost everywhere",
    "Sign": "piecewise constant: zero gradient almost everywhere",
}


def _make_kernel(name: str, fn: Callable, float_only: bool, slot: str):
    def unary_cpu(x: np.ndarray) -> tuple[np.ndarray]:
        if float_only:
            check_float(x, slot)
        else:
            check_real(x, slot)
        if x.dtype.kind in "iu":
            return (fn(x).astype(x.dtype, copy=False),)
        return (float_apply(fn, x),)

    unary_cpu.__name__ = f"{name.lower()}_cpu"
    return kernel(name)(unary_cpu)


for _name, (_fn, _formula, _float_only) in UNARY.items():
    _x, _y = ("X", "Y") if _name in _XY else ("input", "output")
    _kind = "float (bfloat16 included)" if _float_only else "integer or float"
    schema(
        _name,
        inputs=[_x],
        outputs=[_y],
        inplace={0: 0},
        doc=f"{_y} = {_formula}, elementwise; {_x} {_kind}; same shape and dtype",
    )
    _make_kernel(_name, _fn, _float_only, _x)
    if _name in NOT_DIFFERENTIABLE:
        no_gradient(_name, NOT_DIFFERENTIABLE[_name])


schema(
    "Mod",
    inputs=["A", "B"],
    outputs=["C"],
    attrs={"fmod": 0},
    doc="C = A - floor(A / B) * B (fmod=0: the sign of B, as Python's %) or "
    "A - trunc(A / B) * B (fmod=1: the sign of A, as C's fmod); A and B broadcast "
    "(ONNX multidirectional), same integer or float dtype; C: that dtype, broadcast shape",
)


def _check_fmod(fmod: int, op: str) -> None:
    if fmod not in (0, 1):
        raise ValueError(f"{op}: argument 'fmod' is {fmod}, expected 0 or 1")


@kernel("Mod")
def mod_cpu(a: np.ndarray, b: np.ndarray, fmod: int) -> tuple[np.ndarray]:
    named = {"A": a, "B": b}
    check_real(a, "A")
    check_same_dtype(named)
    check_broadcast(named)
    _check_fmod(fmod, "Mod")
    fn = np.fmod if fmod else np.mod
    if a.dtype.kind in "iu":
        if not np.all(b):
            raise ValueError("input 'B' contains zeros: integer modulo by zero is undefined")
        return (fn(a, b),)
    return (float_apply(fn, a, b),)


schema(
    "ModGradient",
    inputs=["A", "B", "dC"],
    outputs=["dA", "dB"],
    attrs={"fmod": 0},
    onnx=False,
    output_mask=True,
    doc="dA = sum_like(dC, A), dB = sum_like(-dC * q, B), q = floor(A / B) (fmod=0) or "
    "trunc(A / B) (fmod=1), the quotient Mod's C = A - q * B used; shapes and dtypes of A "
    "and B; integer A and B get zeros",
)


def mod_quotient(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    """The integer q (as float64) with Mod's C = A - q * B, broadcast: floor(A / B) for fmod=0,
    trunc(A / B) for fmod=1.

    Derived from the exact remainder fmod(A, B) rather than from floor(A / B): A / B rounds,
    and can land on the integer above the true quotient when it is just below one (1 / 0.1
    gives 10.0, while 1 = 9 * 0.1 + 0.0999...). So q is the quotient that the forward's
    np.mod or np.fmod used (NumPy's divmod derives it the same way).
    """
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        r = np.fmod(a64, b64)
        q = np.round((a64 - r) / b64)  # exactly an integer in real arithmetic: A - r = trunc * B
        if not fmod:  # np.mod moves a remainder whose sign differs from B's by one B
            q = np.where((r != 0) & ((r < 0) != (b64 < 0)), q - 1, q)
    return q


@kernel("ModGradient")
def mod_gradient_cpu(
    a: np.ndarray, b: np.ndarray, dc: np.ndarray, fmod: int, output_mask: tuple[bool, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    _check_fmod(fmod, "ModGradient")
    shape = tuple(check_broadcast({"A": a, "B": b}))
    if dc.shape != shape:
        raise ShapeError(
            f"ModGradient: input 'dC' has shape {list(dc.shape)}, expected {list(shape)} "
            "(A and B broadcast)"
        )
    if a.dtype.kind in "iu":
        # integers have no derivative; a float loss reaches an integer C only through Cast,
        # whose gradient to an integer is zeros, so zeros are what pass on
        zeros = (np.zeros_like(a), np.zeros_like(b))
        return tuple(z if want else None for z, want in zip(zeros, output_mask))
    dc64 = dc.astype(np.float64)  # sums of float16 or bfloat16 terms lose less in float64
    da = db = None
    if output_mask[0]:
        da = sum_to_shape(dc64, a.shape).astype(a.dtype)
    if output_mask[1]:
        db = sum_to_shape(-dc64 * mod_quotient(a, b, fmod), b.shape).astype(b.dtype)
    return da, db


@gradient("Mod")
def mod_grad(op, g_out, g_in):
    """dC/dA = 1 and dC/dB = -q away from the jumps where A / B is an integer."""
    outs = [name or "" for name in g_in]
    return [op_def("ModGradient", [op.input[0], op.input[1], g_out[0]], outs, **copy_attrs(op))]
