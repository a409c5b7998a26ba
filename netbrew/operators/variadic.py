"""Elementwise reductions over 1..N broadcast inputs: Sum, Mean, Max and Min."""

from __future__ import annotations

import functools

import numpy as np

from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.schema import kernel, schema

for _name, _formula, _dtypes in (
    ("Sum", "data_0 + data_1 + ...", "float"),
    ("Mean", "(data_0 + data_1 + ...) / N", "float"),
    ("Max", "max(data_0, data_1, ...)", "numeric"),
    ("Min", "min(data_0, data_1, ...)", "numeric"),
):
    schema(
        _name,
        inputs=["data_0*"],
        outputs=[_name.lower()],
        inplace={0: 0},
        dtypes=_dtypes,
        doc=f"{_name.lower()} = {_formula}, elementwise over N >= 1 inputs of one dtype, "
        "broadcast (ONNX multidirectional); output has the broadcast shape",
    )


def _fold(ufunc: np.ufunc, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    named = {f"data_{i}": a for i, a in enumerate(arrays)}
    check_same_dtype(named, allow_bool=False)
    check_broadcast(named)
    if len(arrays) == 1:
        return arrays[0].copy()
    return functools.reduce(ufunc, arrays)


@kernel("Sum")
def sum_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    return (_fold(np.add, arrays),)


@kernel("Mean")
def mean_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    total = _fold(np.add, arrays)
    return (np.divide(total, len(arrays), out=total),)


@kernel("Max")
def max_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    return (_fold(np.maximum, arrays),)


@kernel("Min")
def min_cpu(*arrays: np.ndarray) -> tuple[np.ndarray]:
    return (_fold(np.minimum, arrays),)
