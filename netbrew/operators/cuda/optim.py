"""CUDA kernels of WeightedSum (and WeightedSumGradient), MomentumSGDUpdate and Adam
(optim.cu), after netbrew/operators/train.py.

WeightedSum's weights and MomentumSGDUpdate's lr stay on the GPU and are read there by the
kernels (a read-back would make each launch wait for the device: 132 waits a step of the
ResNet-18-sized training net); Adam's lr and counter and WeightedSumGradient's weight are
read back and rounded on the host as the CPU kernels round them. The updates return new
arrays, as the CPU kernels do (the executor stores them under the in-place output names).
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.cuda import to_gpu, to_host
from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.cuda.elementwise import FLOAT, fill, launch, same_dtype
from netbrew.operators.cuda.elementwise_binary import sum_to_shape, zip_with
from netbrew.operators.cuda.elementwise_cast import cast
from netbrew.operators.cuda.launch import empty, suffix
from netbrew.operators.schema import kernel as register
from netbrew.operators.train import _counter, _one, _same_shape, check_one

FAMILY = "optim"


@register("WeightedSum", device="cuda")
def weighted_sum_cuda(*inputs):
    op = "WeightedSum"
    if len(inputs) % 2:
        raise ShapeError(
            f"{op}: got {len(inputs)} inputs, expected pairs (X0, weight0, X1, weight1, ...)"
        )
    xs, ws = inputs[0::2], inputs[1::2]
    named = {f"X{i}": x for i, x in enumerate(xs)}
    _same_shape(op, "X0", named)
    dtype = same_dtype(op, **named)
    tag = suffix(dtype, op, FLOAT)
    y = empty(xs[0].shape, dtype)
    for i, (x, w) in enumerate(zip(xs, ws)):
        weight = on_device(w, dtype, op, f"weight{i}")
        launch(FAMILY, f"weighted_sum_{tag}", y.size, (x, weight, y), np.int32(i == 0))
    return (y,)


def on_device(value, dtype, op: str, slot: str):
    """A one-element input as a one-element GPU array of `dtype` (cast on the device, as the
    CPU kernels round it), for kernels that read it there: a read-back to the host would
    make every such launch wait for the GPU."""
    check_one(value, op, slot)
    value = to_gpu(value, device=None)
    return value if np.dtype(value.dtype) == dtype else cast(value, dtype, op)


@register("WeightedSumGradient", device="cuda")
def weighted_sum_gradient_cuda(dy, weight, x=None, *, output_mask):
    """dX = weight * dY (X's dtype, else dY's); dweight = sum(X * dY) in float64."""
    op = "WeightedSumGradient"
    check_one(weight, op, "weight")
    if x is not None:
        _same_shape(op, "dY", {"dY": dy, "X": x})
    dx = dweight = None
    if output_mask[0]:
        dtype = np.dtype(dy.dtype if x is None else x.dtype)
        g = dy if np.dtype(dy.dtype) == dtype else cast(dy, dtype, op)
        dx = empty(dy.shape, dtype)
        w_dev = on_device(weight, dtype, op, "weight")  # dx = w * dY
        launch(FAMILY, f"weighted_sum_{suffix(dtype, op, FLOAT)}", dx.size, (g, w_dev, dx),
               np.int32(1))  # fmt: skip
    if output_mask[1]:
        if x is None:
            raise SchemaError(f"{op}: output 'dweight' needs input 'X', which is not given")
        product = zip_with(op, "mul", cast(x, np.float64, op), cast(dy, np.float64, op), FLOAT)
        total = float(to_host(sum_to_shape(product, (), fresh=False)))
        dweight = fill(total, weight.shape, weight.dtype)
    return dx, dweight


@register("MomentumSGDUpdate", device="cuda")
def momentum_sgd_update_cuda(grad, moment, lr, param, *, momentum: float, nesterov: int):
    op = "MomentumSGDUpdate"
    _same_shape(op, "param", {"param": param, "grad": grad, "moment": moment})
    dtype = same_dtype(op, grad=grad, moment=moment, param=param)
    rate = on_device(lr, dtype, op, "lr")
    outs = [empty(param.shape, dtype) for _ in range(3)]  # step, moment, param
    scalars = np.float64(momentum), np.int32(bool(nesterov))
    launch(
        FAMILY,
        f"momentum_sgd_{suffix(dtype, op, FLOAT)}",
        param.size,
        (grad, moment, param, rate, *outs),
        *scalars,
    )
    return tuple(outs)


@register("Adam", device="cuda")
def adam_cuda(param, moment_1, moment_2, grad, lr, counter, *, beta1, beta2, epsilon):
    op = "Adam"
    named = {"param": param, "moment_1": moment_1, "moment_2": moment_2, "grad": grad}
    _same_shape(op, "param", named)
    dtype = same_dtype(op, **named)
    t = _counter(to_host(counter), op) + 1
    correction = math.sqrt(1 - beta2**t) / (1 - beta1**t)
    rate = float(_one(to_host(lr), op, "lr").astype(dtype) * dtype.type(correction))
    outs = [empty(param.shape, dtype) for _ in range(3)]  # param, moment_1, moment_2
    scalars = [np.float64(v) for v in (beta1, 1 - beta1, beta2, 1 - beta2, rate, epsilon)]
    launch(
        FAMILY,
        f"adam_{suffix(dtype, op, FLOAT)}",
        param.size,
        (param, moment_1, moment_2, grad, *outs),
        *scalars,
    )
    return tuple(outs)
