"""CUDA kernels of WeightedSum (and WeightedSumGradient), MomentumSGDUpdate and Adam
(optim.cu), after netbrew/operators/train.py.

WeightedSum's weights and MomentumSGDUpdate's lr stay on the GPU and are read there by the
kernels (a read-back would make each launch wait for the device: 132 waits a step of the
ResNet-18-sized training net); Adam's lr and counter and WeightedSumGradient's weight are
read back and rounded on the host as the CPU kernels round them. The updates return new
arrays, as the CPU kernels do (the executor stores them under the in-place output names).

WeightedSum and MomentumSGDUpdate also have batched kernels: the simple runtime gives
them a run of consecutive ops (a training net's optimizer, one op per parameter; see
netbrew/executor/batching.py), and one launch updates up to MULTI tensors. On the
ResNet-18-sized step of benchmarks/cuda.py that is 4 launches instead of 94.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.cuda import to_gpu, to_host
from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.cuda.elementwise import FLOAT, fill, launch, same_dtype
from netbrew.operators.cuda.elementwise_binary import sum_to_shape, zip_with
from netbrew.operators.cuda.elementwise_cast import cast
from netbrew.operators.cuda.launch import BLOCK, empty, kernel, suffix
from netbrew.operators.schema import batched_kernel
from netbrew.operators.schema import kernel as register
from netbrew.operators.train import _counter, _one, _same_shape, check_one

FAMILY = "optim"
MULTI = 32  # tensors per batched launch (optim.cu's NB_MULTI)
MULTI_PAIRS = 4  # the most WeightedSum pairs a batched launch takes (NB_MULTI_PAIRS)
CHUNK = 1024  # elements a block of a batched launch serves (NB_MULTI_CHUNK)


def _pairs(inputs: tuple) -> tuple[np.dtype, tuple, tuple]:
    """WeightedSum's (dtype, X's, weights), checked: pairs, and X's of one shape and dtype."""
    op = "WeightedSum"
    if len(inputs) % 2:
        raise ShapeError(
            f"{op}: got {len(inputs)} inputs, expected pairs (X0, weight0, X1, weight1, ...)"
        )
    xs, ws = inputs[0::2], inputs[1::2]
    named = {f"X{i}": x for i, x in enumerate(xs)}
    _same_shape(op, "X0", named)
    return same_dtype(op, **named), xs, ws


def _sgd_dtype(grad, moment, param) -> np.dtype:
    """MomentumSGDUpdate's dtype, checked: grad, moment and param of one shape and dtype."""
    op = "MomentumSGDUpdate"
    _same_shape(op, "param", {"param": param, "grad": grad, "moment": moment})
    return same_dtype(op, grad=grad, moment=moment, param=param)


@register("WeightedSum", device="cuda")
def weighted_sum_cuda(*inputs):
    op = "WeightedSum"
    dtype, xs, ws = _pairs(inputs)
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
    dtype = _sgd_dtype(grad, moment, param)
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


def launch_multi(name: str, rows: list[tuple], sizes: list[int], words: int, *scalars) -> None:
    """Launches batched kernel `name` of optim.cu over tensors of `sizes`, MULTI at a time.

    `rows[k]` holds tensor k's pointers (GPUArrays, in the table's order of pointer
    arrays); the table passed by value is those pointer arrays, MULTI words each, then the
    sizes, then each tensor's first block. Empty tensors are left out."""
    live = [(row, n) for row, n in zip(rows, sizes) if n]
    for first in range(0, len(live), MULTI):
        part = live[first : first + MULTI]
        table = np.zeros(words, np.int64)
        arrays = len(part[0][0])
        blocks = 0
        for t, (row, n) in enumerate(part):
            for k, array in enumerate(row):
                table[k * MULTI + t] = int(array.gpudata)
            table[arrays * MULTI + t] = n
            table[(arrays + 1) * MULTI + t] = blocks
            blocks += -(-n // CHUNK)
        kernel(FAMILY, name)(
            table, np.int32(len(part)), *scalars, grid=(blocks, 1, 1), block=(BLOCK, 1, 1)
        )


SGD_WORDS = 9 * MULTI + 1  # optim.cu's nb_sgd_table
WSUM_WORDS = (2 * MULTI_PAIRS + 3) * MULTI + 1  # nb_wsum_table


@batched_kernel("MomentumSGDUpdate", device="cuda")
def momentum_sgd_update_batched_cuda(calls, *, momentum: float, nesterov: int):
    op = "MomentumSGDUpdate"
    checked = []
    for grad, moment, lr, param in calls:
        dtype = _sgd_dtype(grad, moment, param)
        checked.append((dtype, grad, moment, on_device(lr, dtype, op, "lr"), param))
    dtypes = {c[0] for c in checked}
    if len(dtypes) > 1:
        return [momentum_sgd_update_cuda(*c, momentum=momentum, nesterov=nesterov) for c in calls]
    tag = suffix(dtypes.pop(), op, FLOAT)
    results, rows = [], []
    for dtype, grad, moment, rate, param in checked:
        outs = tuple(empty(param.shape, dtype) for _ in range(3))  # step, moment, param
        results.append(outs)
        rows.append((grad, moment, param, rate, *outs))
    sizes = [int(c[4].size) for c in checked]
    launch_multi(f"momentum_sgd_multi_{tag}", rows, sizes, SGD_WORDS, np.float64(momentum),
                 np.int32(bool(nesterov)))  # fmt: skip
    return results


@batched_kernel("WeightedSum", device="cuda")
def weighted_sum_batched_cuda(calls):
    op = "WeightedSum"
    if len(calls[0]) > 2 * MULTI_PAIRS or len({len(c) for c in calls}) > 1:
        return [weighted_sum_cuda(*c) for c in calls]
    checked = []
    for inputs in calls:
        dtype, xs, weights = _pairs(inputs)
        ws = [on_device(w, dtype, op, f"weight{i}") for i, w in enumerate(weights)]
        checked.append((dtype, xs, ws))
    dtypes = {c[0] for c in checked}
    if len(dtypes) > 1:
        return [weighted_sum_cuda(*c) for c in calls]
    tag = suffix(dtypes.pop(), op, FLOAT)
    results, rows, sizes = [], [], []
    pairs = len(calls[0]) // 2
    for dtype, xs, ws in checked:
        y = empty(xs[0].shape, dtype)
        results.append((y,))
        unused = [y] * (MULTI_PAIRS - pairs)  # rows the kernel skips
        rows.append((*xs, *unused, *ws, *unused, y))
        sizes.append(int(y.size))
    launch_multi(f"weighted_sum_multi_{tag}", rows, sizes, WSUM_WORDS, np.int32(pairs))
    return results
