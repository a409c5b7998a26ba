"""Training ops, as Caffe2: the iteration counter, learning-rate schedules, optimizer updates
and StopGradient.

Optimizer updates write their parameters and moments in place. Caffe2 optimizers use a
negative learning rate for Adam (param_out = param + lr * step) and a positive one for
MomentumSGDUpdate (param_out = param - step), and so do these kernels.

WeightedSum is linear and has a gradient (WeightedSumGradient, one op per pair, as Caffe2's
WeightedSumGradient); the optimizer updates are differentiable too, but netbrew does not
differentiate through a training step, and the counter ops have no gradient at all.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators import train_jit
from netbrew.operators.schema import (
    REQUIRED,
    gradient,
    gradient_not_written,
    kernel,
    no_gradient,
    schema,
)

schema(
    "Iter",
    inputs=["iter"],
    outputs=["iter_out"],
    inplace={0: 0},
    dtypes="int",
    onnx=False,
    doc="iter_out = iter + 1; iter is the int64 (or int32) [1] counter, written in place",
)
schema(
    "LearningRate",
    inputs=["iter"],
    outputs=["lr"],
    attrs={"base_lr": REQUIRED, "policy": REQUIRED, "gamma": None, "stepsize": None, "power": None},
    dtypes="int",
    onnx=False,
    doc="lr = base_lr * f(iter), float32 [1]; iter int64 [1]; policy 'fixed': f = 1, 'step': "
    "gamma ^ floor(iter / stepsize), 'exp': gamma ^ iter, 'inv': (1 + gamma * iter) ^ -power",
)
schema(
    "WeightedSum",
    inputs=["X0", "weight0", "inputs*0"],
    outputs=["Y"],
    inplace={0: 0},
    dtypes="float",
    onnx=False,
    doc="Y = sum_i weight_i * X_i over inputs (X0, weight0, X1, weight1, ...); the X_i share "
    "one shape, each weight_i has one value; Y has X0's shape and dtype",
)
schema(
    "MomentumSGDUpdate",
    inputs=["grad", "moment", "lr", "param"],
    outputs=["output_grad", "output_moment", "output_param"],
    attrs={"momentum": 0.9, "nesterov": 0},
    inplace={0: 0, 1: 1, 3: 2},
    dtypes="float",
    onnx=False,
    doc="m = momentum * moment + lr * grad; output_moment = m; output_grad = m "
    "(nesterov=0) or (1 + momentum) * m - momentum * moment (nesterov=1); output_param = "
    "param - output_grad; lr has one value; defaults momentum=0.9, nesterov=0",
)
schema(
    "Adam",
    inputs=["param", "moment_1", "moment_2", "grad", "lr", "iter"],
    outputs=["output_param", "output_moment_1", "output_moment_2"],
    attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-5},
    inplace={0: 0, 1: 1, 2: 2},
    dtypes={0: "float", 1: "float", 2: "float", 3: "float", 4: "float", 5: "int"},
    onnx=False,
    doc="t = iter + 1; m1 = beta1 * moment_1 + (1 - beta1) * grad; m2 = beta2 * moment_2 + "
    "(1 - beta2) * grad^2; output_param = param + lr * sqrt(1 - beta2^t) / (1 - beta1^t) * "
    "m1 / (sqrt(m2) + epsilon); lr has one value (negative to descend), iter int64 [1]; "
    "defaults beta1=0.9, beta2=0.999, epsilon=1e-5",
)
schema(
    "StopGradient",
    inputs=["input"],
    outputs=["output"],
    inplace={0: 0},
    onnx=False,
    doc="output = input; no gradient flows back through it",
)
no_gradient("StopGradient", "stops gradients by design")
for _op in ("Iter", "LearningRate"):
    no_gradient(_op, "a function of the integer iteration counter: no gradient in math")
for _op in ("MomentumSGDUpdate", "Adam"):
    gradient_not_written(
        _op, "an optimizer update: differentiating through a training step is not supported"
    )
schema(
    "WeightedSumGradient",
    inputs=["dY", "weight", "X?"],
    outputs=["dX", "dweight"],
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dX = weight * dY (dY's shape, X's dtype, else dY's); dweight = sum(X * dY) in "
    "weight's shape and dtype, summed in float64; one (X, weight) pair of WeightedSum; X is "
    "needed only for dweight",
)


def check_one(x, op: str, slot: str) -> None:
    """ShapeError unless input `slot` (a NumPy or GPU array) holds exactly one value."""
    if x.size != 1:
        raise ShapeError(f"{op}: input {slot!r} has shape {list(x.shape)}, expected one value")


def _one(x: np.ndarray, op: str, slot: str) -> np.ndarray:
    """The single value of a one-element input, as a 0-d array."""
    check_one(x, op, slot)
    return x.reshape(())


def _counter(x: np.ndarray, op: str) -> int:
    # Caffe2's optimizers keep an int64 counter; its tutorials also fill an int32 one.
    if x.dtype not in (np.int64, np.int32):
        raise ShapeError(f"{op}: input 'iter' has dtype {x.dtype}, expected int64 or int32")
    return int(_one(x, op, "iter"))


def _same_shape(op: str, ref: str, arrays: dict[str, np.ndarray]) -> None:
    want = arrays[ref].shape
    for slot, x in arrays.items():
        if x.shape != want:
            raise ShapeError(
                f"{op}: input {slot!r} has shape {list(x.shape)}, "
                f"expected {list(want)} like {ref!r}"
            )


@kernel("Iter")
def iter_cpu(counter: np.ndarray) -> tuple[np.ndarray]:
    if _counter(counter, "Iter") == np.iinfo(counter.dtype).max:
        raise OverflowError(f"Iter: the counter has reached the largest {counter.dtype}")
    return (counter + 1,)


def _multiplier(it: int, policy: str, gamma, stepsize, power) -> float:
    needs = {
        "fixed": (),
        "step": ("gamma", "stepsize"),
        "exp": ("gamma",),
        "inv": ("gamma", "power"),
    }
    if policy not in needs:
        raise ValueError(
            f"LearningRate: unknown policy {policy!r}; known policies: {', '.join(needs)}"
        )
    given = {"gamma": gamma, "stepsize": stepsize, "power": power}
    for name in needs[policy]:
        if given[name] is None:
            raise ValueError(f"LearningRate: policy {policy!r} needs argument {name!r}")
    if policy == "step":
        if stepsize <= 0:
            raise ValueError(f"LearningRate: argument 'stepsize' is {stepsize}, expected > 0")
        return float(gamma) ** (it // int(stepsize))
    if policy == "exp":
        return float(gamma) ** it
    if policy == "inv":
        return (1 + float(gamma) * it) ** -float(power)
    return 1.0


@kernel("LearningRate")
def learning_rate_cpu(counter, *, base_lr, policy, gamma, stepsize, power) -> tuple[np.ndarray]:
    mult = _multiplier(_counter(counter, "LearningRate"), policy, gamma, stepsize, power)
    return (np.array([float(base_lr) * mult], np.float32),)


@kernel("WeightedSum")
def weighted_sum_cpu(*inputs: np.ndarray) -> tuple[np.ndarray]:
    if len(inputs) % 2:
        raise ShapeError(
            f"WeightedSum: got {len(inputs)} inputs, expected pairs (X0, weight0, X1, weight1, ...)"
        )
    xs, ws = inputs[0::2], inputs[1::2]
    _same_shape("WeightedSum", "X0", {f"X{i}": x for i, x in enumerate(xs)})
    if train_jit.applies(*xs):
        weights = [float(_one(w, "WeightedSum", f"weight{i}")) for i, w in enumerate(ws)]
        return (train_jit.weighted_sum(list(xs), weights),)
    y = np.zeros_like(xs[0])
    for i, (x, w) in enumerate(zip(xs, ws)):
        y += _one(w, "WeightedSum", f"weight{i}").astype(x.dtype) * x
    return (y,)


@kernel("WeightedSumGradient")
def weighted_sum_gradient_cpu(dy, weight, x=None, *, output_mask):
    op = "WeightedSumGradient"
    w = _one(weight, op, "weight")
    if x is not None:
        _same_shape(op, "dY", {"dY": dy, "X": x})
    dx = dweight = None
    if output_mask[0]:
        dtype = dy.dtype if x is None else x.dtype
        dx = np.asarray(w.astype(dtype) * dy.astype(dtype), dtype)  # stays an array when 0-d
    if output_mask[1]:
        if x is None:
            raise SchemaError(f"{op}: output 'dweight' needs input 'X', which is not given")
        total = np.sum(x.astype(np.float64) * dy.astype(np.float64))
        dweight = np.full(weight.shape, total).astype(weight.dtype)
    return dx, dweight


@gradient("WeightedSum")
def weighted_sum_grad(op, g_out, g_in):
    """dX_i = w_i * dY and dw_i = sum(X_i * dY), one WeightedSumGradient per wanted pair.

    X_i is read only when dw_i is wanted. Not inplace_safe: written in place, the op
    overwrites X0, so autodiff refuses a dw0 (whose op reads X0) and accepts dX alone.
    """
    if len(op.input) % 2:
        raise SchemaError(
            f"WeightedSum: got {len(op.input)} inputs, expected pairs "
            "(X0, weight0, X1, weight1, ...)"
        )
    pairs = [(i, g_in[2 * i], g_in[2 * i + 1]) for i in range(len(op.input) // 2)]
    # a pair whose gradient overwrites dY (same name) must run after the others read dY
    pairs.sort(key=lambda p: any(g is not None and g in g_out for g in p[1:]))
    ops = []
    for i, dx, dw in pairs:
        if dx is None and dw is None:
            continue
        x, w = op.input[2 * i], op.input[2 * i + 1]
        ins = [g_out[0], w, x] if dw is not None else [g_out[0], w]
        ops.append(op_def("WeightedSumGradient", ins, [dx or "", dw or ""]))
    return ops


@kernel("MomentumSGDUpdate")
def momentum_sgd_update_cpu(grad, moment, lr, param, *, momentum, nesterov):
    _same_shape("MomentumSGDUpdate", "param", {"param": param, "grad": grad, "moment": moment})
    lr = _one(lr, "MomentumSGDUpdate", "lr").astype(grad.dtype)
    if train_jit.applies(grad, moment, param):
        return train_jit.momentum_sgd_update(grad, moment, float(lr), param, momentum, nesterov)
    mom = grad.dtype.type(momentum)
    m_new = mom * moment + lr * grad
    step = (1 + mom) * m_new - mom * moment if nesterov else m_new
    return step, m_new, param - step


@kernel("Adam")
def adam_cpu(param, moment_1, moment_2, grad, lr, counter, *, beta1, beta2, epsilon):
    _same_shape(
        "Adam", "param", {"param": param, "moment_1": moment_1, "moment_2": moment_2, "grad": grad}
    )
    t = _counter(counter, "Adam") + 1
    correction = math.sqrt(1 - beta2**t) / (1 - beta1**t)
    dtype = param.dtype.type
    m1 = dtype(beta1) * moment_1 + dtype(1 - beta1) * grad
    m2 = dtype(beta2) * moment_2 + dtype(1 - beta2) * grad * grad
    rate = _one(lr, "Adam", "lr").astype(param.dtype) * dtype(correction)
    return param + rate * m1 / (np.sqrt(m2) + dtype(epsilon)), m1, m2


@kernel("StopGradient")
def stop_gradient_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    return (x,)
