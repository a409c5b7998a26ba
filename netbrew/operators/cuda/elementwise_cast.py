"""CUDA kernels of Cast and CastGradient (float32/16/64, int32/64 and bool, every pair),
the fills the elementwise modules use, and Dropout and DropoutGradient
(elementwise_cast.cu).

Dropout's mask cannot repeat the CPU's NumPy draw: each run takes a 64-bit seed from the
op's generator (seeded as the CPU kernel's, advancing from run to run) and hashes it with
the element's index (splitmix64), keeping an element when its uniform draw is >= ratio.
Shapes, dtypes and the scaling by 1 / (1 - ratio) are the CPU kernel's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.cuda import to_host
from netbrew.errors import ShapeError
from netbrew.operators.constant import onnx_dtype
from netbrew.operators.cuda.elementwise import FLOAT, INT, copy, fill, launch
from netbrew.operators.cuda.launch import empty, suffix
from netbrew.operators.schema import DTYPE_CLASSES
from netbrew.operators.schema import kernel as register

FAMILY = "elementwise_cast"
ALL = FLOAT + INT + ("b8",)


def cast(x: Any, dtype: Any, op: str = "Cast") -> Any:
    """x converted to `dtype` as NumPy's astype (C's conversions); a copy when equal."""
    dtype = np.dtype(dtype)
    if np.dtype(x.dtype) == dtype:
        return copy(x)
    name = f"cast_{suffix(x.dtype, op, ALL)}_{suffix(dtype, op, ALL)}"
    y = empty(x.shape, dtype)
    launch(FAMILY, name, x.size, (x, y))
    return y


@register("Cast", device="cuda")
def cast_cuda(x, to: int | str, saturate: int, round_mode: str):
    """`to` as ONNX's name or number; float8, strings and the other types are CPU-only."""
    return (cast(x, onnx_dtype(to)),)


def _is_float(dtype: Any) -> bool:
    dtype = np.dtype(dtype)
    return DTYPE_CLASSES["float"](dtype) or dtype.name.startswith("float")


@register("CastGradient", device="cuda")
def cast_gradient_cuda(x, dy=None):
    if dy is None or not (_is_float(x.dtype) and _is_float(dy.dtype)):
        return (fill(0, x.shape, x.dtype),)
    return (cast(dy, x.dtype, "CastGradient"),)


def _ratio_and_training(op: str, ratio, training_mode) -> tuple[float, bool]:
    """Dropout's p (default 0.5) and training flag (default False), read to the host."""
    ratio, training_mode = to_host(ratio), to_host(training_mode)
    for name, v in (("ratio", ratio), ("training_mode", training_mode)):
        if op == "Dropout" and v is not None and np.size(v) != 1:
            raise ShapeError(
                f"Dropout: input {name} has shape {list(np.shape(v))}, expected a scalar"
            )
    p = 0.5 if ratio is None else float(np.asarray(ratio).reshape(()))
    training = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
    return p, training


@register("Dropout", device="cuda")
def dropout_cuda(data, ratio=None, training_mode=None, *, seed: int | None, rng=None):
    """Zeroes each element with probability `ratio` in training; identity otherwise."""
    p, training = _ratio_and_training("Dropout", ratio, training_mode)
    if not training or p == 0.0:
        return copy(data), fill(1, data.shape, np.bool_)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"Dropout: input ratio is {p}, expected a value in [0, 1)")
    tag = suffix(data.dtype, "Dropout", FLOAT)
    rng = np.random.default_rng(seed) if rng is None else rng
    draw = np.uint64(rng.integers(0, 2**64, dtype=np.uint64))
    y, mask = empty(data.shape, data.dtype), empty(data.shape, np.bool_)
    scalars = draw, np.float64(p), np.float64(1.0 / (1.0 - p))
    launch(FAMILY, f"dropout_{tag}", data.size, (data, y, mask), *scalars)
    return y, mask


@register("DropoutGradient", device="cuda")
def dropout_gradient_cuda(dy, mask, ratio=None, training_mode=None):
    p, training = _ratio_and_training("DropoutGradient", ratio, training_mode)
    if not training or p == 0.0:
        return (copy(dy),)
    if mask.shape != dy.shape:
        raise ValueError(
            f"DropoutGradient: input mask has shape {list(mask.shape)}, expected dY's "
            f"{list(dy.shape)}"
        )
    tag = suffix(dy.dtype, "DropoutGradient", FLOAT)
    dx = empty(dy.shape, dy.dtype)
    launch(FAMILY, f"dropout_grad_{tag}", dy.size, (dy, mask, dx), np.float64(1.0 / (1.0 - p)))
    return (dx,)
