"""ReduceMin, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceProd, ReduceSumSquare.

All take `axes` as an optional int64 input and follow reduce.py's conventions (keepdims,
output in the data's dtype, 16-bit floats accumulated in float32). With noop_with_empty_axes
and no axes they reduce over no axes, so the elementwise steps still apply (ReduceSumSquare
squares, ReduceLogSum takes the log), as ONNX specifies.
Their gradients are in reduce_extra_grad.py.
"""

from __future__ import annotations

import functools

import numpy as np

from netbrew.errors import SchemaError
from netbrew.operators.reduce import _REDUCE_ATTRS, _REDUCE_DOC, _acc_dtype, _axes
from netbrew.operators.schema import kernel, schema

_ALL = "numeric"  # checked in the kernel: DTYPE_CLASSES' "numeric" leaves out bfloat16

_SPECS = {
    "ReduceMin": (
        "min(data)",
        "+inf for floats, the dtype's maximum for integers, True for bool",
        _ALL,
    ),
    "ReduceL1": ("sum(|data|)", "0", _ALL),
    "ReduceL2": ("sqrt(sum(data^2))", "0", _ALL),
    "ReduceLogSum": ("log(sum(data))", "-inf", "float"),
    "ReduceLogSumExp": ("log(sum(exp(data)))", "-inf", "float"),
    "ReduceProd": ("prod(data)", "1", _ALL),
    "ReduceSumSquare": ("sum(data^2)", "0", _ALL),
}

for _name, (_formula, _empty, _cls) in _SPECS.items():
    schema(
        _name,
        inputs=["data", "axes?"],
        outputs=["reduced"],
        attrs=_REDUCE_ATTRS,
        dtypes={0: "float", 1: "int"} if _cls == "float" else {1: "int"},
        doc=f"reduced = {_formula} {_REDUCE_DOC}; {_empty} over an empty set",
    )


def _numeric(op: str, data: np.ndarray, bool_ok: bool = False) -> None:
    kinds = "iufb" if bool_ok else "iuf"
    if data.dtype.kind not in kinds and data.dtype.name != "bfloat16":
        want = "a numeric or bool type" if bool_ok else "a numeric (non-bool) type"
        raise SchemaError(f"{op}: input data has dtype {data.dtype}, expected {want}")


def _min(data: np.ndarray, **kw) -> np.ndarray:
    if data.dtype.kind == "b":
        highest = True
    elif data.dtype.kind in "iu":
        highest = np.iinfo(data.dtype).max
    else:
        highest = np.inf
    return np.min(data, initial=highest, **kw)


def _l1(data: np.ndarray, **kw) -> np.ndarray:
    return np.sum(np.abs(data), dtype=_acc_dtype(data.dtype), **kw)


def _sum_square(data: np.ndarray, **kw) -> np.ndarray:
    d = data.astype(_acc_dtype(data.dtype), copy=False)
    return np.sum(d * d, **kw)


def _l2(data: np.ndarray, **kw) -> np.ndarray:
    total = _sum_square(data, **kw)
    if data.dtype.kind in "iu":  # ONNX casts sqrt's result back to the integer type
        return np.sqrt(total.astype(np.float64))
    return np.sqrt(total)


def _log_sum(data: np.ndarray, **kw) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # empty set: log(0) = -inf
        return np.log(np.sum(data, dtype=_acc_dtype(data.dtype), **kw))


def _log_sum_exp(data: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    d = data.astype(_acc_dtype(data.dtype), copy=False)
    top = np.max(d, axis=axis, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(top), top, 0).astype(d.dtype)  # all -inf or +inf: no shift
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(d - shift), axis=axis, keepdims=True)) + shift
    return out if keepdims else np.squeeze(out, axis=axis)


def _prod(data: np.ndarray, **kw) -> np.ndarray:
    return np.prod(data, dtype=_acc_dtype(data.dtype), **kw)


_FNS = {
    "ReduceMin": _min,
    "ReduceL1": _l1,
    "ReduceL2": _l2,
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": _log_sum_exp,
    "ReduceProd": _prod,
    "ReduceSumSquare": _sum_square,
}


def _make_kernel(op: str):
    fn = _FNS[op]
    floats = _SPECS[op][2] == "float"  # those are checked by the schema
    check = None if floats else functools.partial(_numeric, bool_ok=op == "ReduceMin")

    def run(
        data: np.ndarray,
        axes: np.ndarray | None = None,
        *,
        keepdims: int,
        noop_with_empty_axes: int,
    ) -> tuple[np.ndarray]:
        if check is not None:
            check(op, data)
        # noop_with_empty_axes reduces over no axes: the elementwise steps still apply
        dims = _axes(op, axes, data.ndim, noop_with_empty_axes) or ()
        out = fn(data, axis=dims, keepdims=bool(keepdims))
        return (np.asarray(out).astype(data.dtype, copy=False),)

    run.__name__ = run.__qualname__ = f"{op.removeprefix('Reduce').lower()}_reduce_cpu"
    run.__doc__ = f"{op}: reduced = {_SPECS[op][0]} over axes."
    return kernel(op)(run)


for _name in _SPECS:
    _make_kernel(_name)
