"""Shared argument handling for brew helpers."""

from __future__ import annotations

from collections.abc import Sequence


def expand(value: int | Sequence[int], n: int, what: str) -> list[int]:
    """An int repeated n times, or a length-n sequence checked."""
    if isinstance(value, int):
        return [value] * n
    values = [int(v) for v in value]
    if len(values) != n:
        raise ValueError(f"{what} {values} has {len(values)} entries, expected {n}")
    return values


def spatial_rank(kernel: int | Sequence[int], default: int = 2) -> int:
    return default if isinstance(kernel, int) else len(kernel)
