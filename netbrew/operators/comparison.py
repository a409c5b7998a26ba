"""Comparisons with ONNX multidirectional broadcasting (Equal, Less, Greater) and Where."""

from __future__ import annotations

import numpy as np

from netbrew.operators.arithmetic import check_broadcast, check_same_dtype
from netbrew.operators.schema import kernel, schema

for _name, _sign, _dtypes in (
    ("Equal", "==", "any"),
    ("Less", "<", "numeric"),
    ("Greater", ">", "numeric"),
):
    schema(
        _name,
        inputs=["A", "B"],
        outputs=["C"],
        dtypes=_dtypes,
        doc=f"C = A {_sign} B; A and B broadcast (ONNX multidirectional), same dtype; "
        "C: bool, broadcast shape",
    )


def _compare(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    named = {"A": a, "B": b}
    check_same_dtype(named, allow_bool=True)
    check_broadcast(named)
    return a, b


@kernel("Equal")
def equal_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.equal(*_compare(a, b)),)


@kernel("Less")
def less_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.less(*_compare(a, b)),)


@kernel("Greater")
def greater_cpu(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray]:
    return (np.greater(*_compare(a, b)),)


schema(
    "Where",
    inputs=["condition", "X", "Y"],
    outputs=["output"],
    inplace={1: 0},
    dtypes={0: "bool"},
    doc="output = condition ? X : Y; condition (bool), X, Y broadcast (ONNX multidirectional); "
    "X and Y share a dtype, which output keeps",
)


@kernel("Where")
def where_cpu(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
    check_same_dtype({"X": x, "Y": y}, allow_bool=True)
    check_broadcast({"condition": condition, "X": x, "Y": y})
    return (np.where(condition, x, y),)
