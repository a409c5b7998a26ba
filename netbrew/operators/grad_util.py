"""Small builders shared by gradient makers."""

from __future__ import annotations

from typing import Any

from netbrew.netdef.net import op_def
from netbrew.proto.netbrew_pb2 import OperatorDef


def reduce_like(grad: str, like: str, out: str) -> list[OperatorDef]:
    """Ops that sum the broadcast gradient `grad` down to the shape of blob `like`."""
    return [op_def("SumReduceLike", [grad, like], [out])]


def copy_attrs(op: OperatorDef, **extra: Any) -> dict[str, Any]:
    """The forward op's arguments as a dict, updated with `extra`."""
    from netbrew.netdef.args import args_dict

    return {**args_dict(op.arg), **extra}


def tmp(name: str, tag: str) -> str:
    """A scratch blob name derived from a gradient blob."""
    return f"{name}_{tag}"
