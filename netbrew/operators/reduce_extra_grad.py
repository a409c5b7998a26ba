"""Gradients of reduce_extra.py's reductions.

    ReduceMin(data, axes) -> reduced
        backward: ReduceMaxGradient(dY, data, reduced, axes) -> dX  (the same rule: dY goes
        to the elements equal to the reduced value, shared between ties)
    ReduceL1 / ReduceL2 / ReduceLogSum / ReduceLogSumExp / ReduceProd / ReduceSumSquare
        backward: Reduce<Op>Gradient(dY, data, reduced, axes) -> dX

Every gradient op takes the forward's `axes` input and arguments; dY is broadcast back over
the reduced axes of data.
"""

from __future__ import annotations

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.reduce import _REDUCE_ATTRS
from netbrew.operators.reduce_grad import _expand
from netbrew.operators.schema import gradient, kernel, schema

_RULES = {
    "ReduceL1": "dY * sign(data)",
    "ReduceL2": "dY * data / reduced (0 where reduced is 0)",
    "ReduceLogSum": "dY / sum(data) = dY * exp(-reduced)",
    "ReduceLogSumExp": "dY * exp(data - reduced)",
    "ReduceProd": "dY * (product of the other reduced elements), exact when data holds zeros",
    "ReduceSumSquare": "2 * dY * data",
}

for _op, _rule in _RULES.items():
    schema(
        f"{_op}Gradient",
        inputs=["dY", "data", "reduced", "axes?"],
        outputs=["dX"],
        attrs=_REDUCE_ATTRS,
        dtypes={0: "float", 3: "int"},
        onnx=False,
        doc=f"dX = {_rule}, with dY and reduced (the forward's output) broadcast back over the "
        "reduced `axes` of data (all dims when absent or empty, none if "
        "noop_with_empty_axes=1); dX has data's shape and dY's dtype; arguments as the "
        "forward's, defaults keepdims=1, noop_with_empty_axes=0",
    )


def _maker(grad_type: str):
    def maker(op, g_out, g_in):
        if not g_in[0]:
            return []
        ins = [g_out[0], op.input[0], op.output[0]]
        ins += [op.input[1]] if len(op.input) > 1 and op.input[1] else []
        return [op_def(grad_type, ins, [g_in[0]], **copy_attrs(op))]

    maker.__name__ = maker.__qualname__ = f"{grad_type.removesuffix('Gradient').lower()}_grad"
    return maker


gradient("ReduceMin")(_maker("ReduceMaxGradient"))
for _op in _RULES:
    gradient(_op)(_maker(f"{_op}Gradient"))


def _l1(x, y, g, dims):
    return g * np.sign(x)


def _l2(x, y, g, dims):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y == 0, 0, g * x / y)


def _log_sum(x, y, g, dims):
    return g * np.exp(-y)


def _log_sum_exp(x, y, g, dims):
    with np.errstate(invalid="ignore"):
        return g * np.exp(x - y)


def _prod(x, y, g, dims):
    zero = x == 0
    zeros = zero.sum(axis=dims, keepdims=True)
    others = np.prod(np.where(zero, 1, x), axis=dims, keepdims=True)  # product of non-zeros
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = np.where(zero, np.where(zeros == 1, others, 0), np.where(zeros == 0, y / x, 0))
    return g * rest


def _sum_square(x, y, g, dims):
    return 2 * g * x


_FNS = {
    "ReduceL1": _l1,
    "ReduceL2": _l2,
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": _log_sum_exp,
    "ReduceProd": _prod,
    "ReduceSumSquare": _sum_square,
}


def _make_kernel(op: str):
    fn, name = _FNS[op], f"{op}Gradient"

    def run(
        dy: np.ndarray,
        x: np.ndarray,
        reduced: np.ndarray,
        axes: np.ndarray | None = None,
        *,
        keepdims: int,
        noop_with_empty_axes: int,
    ) -> tuple[np.ndarray]:
        g, dims = _expand(name, dy, x, axes, keepdims, noop_with_empty_axes)
        work = np.float64 if dy.dtype == np.float64 else np.float32
        xf, yf = x.astype(work, copy=False), reduced.astype(work, copy=False).reshape(g.shape)
        dx = fn(xf, yf, g.astype(work, copy=False), dims)
        return (np.broadcast_to(dx, x.shape).astype(dy.dtype),)

    run.__name__ = run.__qualname__ = f"{op.removeprefix('Reduce').lower()}_reduce_gradient_cpu"
    return kernel(name)(run)


for _op in _RULES:
    _make_kernel(_op)
