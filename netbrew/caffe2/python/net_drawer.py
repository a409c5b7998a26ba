"""caffe2.python.net_drawer on netbrew: pydot graphs of a net (the `pydot` package)."""

from __future__ import annotations

from typing import Any

from netbrew.netdef.dataflow import blob_dataflow, op_dataflow, to_pydot


def _name(net_or_ops: Any, name: str | None) -> str:
    if name:
        return name
    proto = net_or_ops.proto() if hasattr(net_or_ops, "proto") else net_or_ops
    return getattr(proto, "name", "") or "net"


def GetPydotGraph(operators_or_net: Any, name: str | None = None, rankdir: str = "LR",  # noqa: N802
                  op_node_producer: Any = None, blob_node_producer: Any = None):  # fmt: skip
    """Ops and blobs as nodes; a blob written again is a new node."""
    _no_producers(op_node_producer, blob_node_producer)
    return to_pydot(blob_dataflow(operators_or_net), _name(operators_or_net, name), rankdir)


def GetPydotGraphMinimal(operators_or_net: Any, name: str | None = None,  # noqa: N802
                         rankdir: str = "LR", minimal_dependency: bool = False,
                         op_node_producer: Any = None):  # fmt: skip
    """Ops only, an edge from each op to the ops that read its outputs."""
    _no_producers(op_node_producer, None)
    return to_pydot(op_dataflow(operators_or_net), _name(operators_or_net, name), rankdir)


def _no_producers(*producers: Any) -> None:
    if any(p is not None for p in producers):
        raise NotImplementedError("net_drawer: custom node producers are not supported")
