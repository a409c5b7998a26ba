"""A net's dataflow as plain nodes and edges, for drawing (net_drawer, `netbrew draw`).

Two views, as Caffe2's net_drawer drew them:
- blobs: op nodes and blob nodes; a blob written again gets a new node (`y`, then `y#1`),
  so in-place ops draw as a chain instead of a cycle;
- minimal: op nodes only, an edge from each op to the ops that read what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


@dataclass
class Dataflow:
    """Nodes (id -> (kind "op" or "blob", label)) and edges (from id, to id), in order."""

    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)


def _ops(net_or_ops: Any) -> list[OperatorDef]:
    if hasattr(net_or_ops, "proto"):
        net_or_ops = net_or_ops.proto()
    return list(net_or_ops.op if isinstance(net_or_ops, NetDef) else net_or_ops)


def op_label(op: OperatorDef, index: int) -> str:
    """`#3 Conv` with the op's name, if it has one, on a second line."""
    return f"#{index} {op.type}" + (f"\n{op.name}" if op.name else "")


def blob_dataflow(net_or_ops: Any) -> Dataflow:
    """Op and blob nodes; each write of a blob is its own node."""
    flow = Dataflow()
    version: dict[str, int] = {}

    def blob_node(name: str) -> str:
        k = version.get(name, 0)
        node = f"blob:{name}" + (f"#{k}" if k else "")
        flow.nodes.setdefault(node, ("blob", name))
        return node

    for index, op in enumerate(_ops(net_or_ops)):
        op_node = f"op:{index}"
        flow.nodes[op_node] = ("op", op_label(op, index))
        flow.edges.extend((blob_node(b), op_node) for b in op.input if b)
        for b in op.output:
            if not b:
                continue
            if f"blob:{b}" in flow.nodes or b in version:
                version[b] = version.get(b, 0) + 1
            flow.edges.append((op_node, blob_node(b)))
    return flow


def op_dataflow(net_or_ops: Any) -> Dataflow:
    """Op nodes only, with an edge from the last writer of each input to its reader."""
    flow = Dataflow()
    writer: dict[str, str] = {}
    for index, op in enumerate(_ops(net_or_ops)):
        node = f"op:{index}"
        flow.nodes[node] = ("op", op_label(op, index))
        for b in dict.fromkeys(op.input):
            if b in writer and (writer[b], node) not in flow.edges:
                flow.edges.append((writer[b], node))
        for b in op.output:
            writer[b] = node
    return flow


def to_pydot(flow: Dataflow, name: str = "net", rankdir: str = "LR"):
    """The dataflow as a pydot.Dot graph (the `pydot` package): ops as boxes, blobs as
    octagons."""
    try:
        import pydot
    except ImportError:
        raise ImportError("drawing nets needs pydot: pip install pydot") from None
    graph = pydot.Dot(name or "net", graph_type="digraph", rankdir=rankdir)
    for node_id, (kind, label) in flow.nodes.items():
        shape = "box" if kind == "op" else "octagon"
        style = {"style": "filled", "fillcolor": "#EEEEEE"} if kind == "op" else {}
        graph.add_node(pydot.Node(_quote(node_id), label=_quote(label), shape=shape, **style))
    for src, dst in flow.edges:
        graph.add_edge(pydot.Edge(_quote(src), _quote(dst)))
    return graph


def _quote(text: str) -> str:
    """A DOT identifier: quoted, with quotes and backslashes escaped (blob names hold `/`)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
