"""Fillers on the GPU: ConstantFill, GivenTensor*Fill, GaussianFill, UniformFill, XavierFill,
MSRAFill and ConstantOfShape.

These generate on the host and copy: each runs its CPU kernel (netbrew.operators.fillers,
generators) with the same arguments and the same `rng` (the op's seeded NumPy Generator),
then uploads the result to the op's GPU. So a brew model built under
device_scope("cuda:0") initialises its parameters with the very numbers the CPU would draw
for the same seed, at the cost of one host-to-device copy per filler (init nets run once).

An input read only for its shape is not copied back: the CPU kernel gets a zero-strided
NumPy stand-in of it; inputs read for their values (input_as_shape=1, UniformFill's bounds,
ConstantOfShape's shape) are read back with to_host. GivenTensorStringFill has no CUDA
kernel (strings cannot live on a GPU), nor does a ConstantFill of strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netbrew.operators import fillers as cpu
from netbrew.operators.cuda.shape_ops import host, meta, upload
from netbrew.operators.generators import constant_of_shape_cpu
from netbrew.operators.schema import get_kernel
from netbrew.operators.schema import kernel as register


def _shape_input(x: Any, input_as_shape: int) -> Any:
    """The filler's optional input as the CPU kernel needs it: its values when they give
    the shape, else only its shape."""
    if x is None:
        return None
    return host(x) if input_as_shape else meta(x)


def _on_gpu(op: str, arrays: tuple) -> tuple:
    out = []
    for a in arrays:
        if a.dtype.kind == "O":
            raise TypeError(f"{op}: a {a.dtype} tensor cannot be put on a GPU")
        out.append(upload(a))
    return tuple(out)


def _filler(op: str) -> Callable[..., tuple]:
    """The CUDA kernel of a filler whose inputs are (input?): the CPU kernel, uploaded."""
    run = get_kernel(op)

    def filler_cuda(x=None, **attrs):
        x = _shape_input(x, attrs.get("input_as_shape", 0))
        return _on_gpu(op, run(x, **attrs))

    filler_cuda.__name__ = filler_cuda.__qualname__ = f"{op}_cuda"
    return filler_cuda


_FILLERS = (
    "ConstantFill",
    *(op for op in cpu._GIVEN_FILLS if op != "GivenTensorStringFill"),
    "GaussianFill",
    "XavierFill",
    "MSRAFill",
)
for _op in _FILLERS:
    register(_op, device="cuda")(_filler(_op))


@register("UniformFill", device="cuda")
def uniform_fill_cuda(x=None, min_input=None, max_input=None, **attrs):
    x = _shape_input(x, attrs.get("input_as_shape", 0))
    return _on_gpu(
        "UniformFill", cpu.uniform_fill_cpu(x, host(min_input), host(max_input), **attrs)
    )


@register("ConstantOfShape", device="cuda")
def constant_of_shape_cuda(shape, value):
    return _on_gpu("ConstantOfShape", constant_of_shape_cpu(host(shape), value))
