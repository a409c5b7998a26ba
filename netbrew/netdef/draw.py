"""Draws a net with Graphviz (`netbrew draw`): ops as boxes, blobs as ellipses.

Built on netbrew.netdef.dataflow. Edges carry the blobs' shapes when they are known: from
the net's value_info (ONNX import infers them by default), from a `value_info` the caller
passes, or from the blobs of a workspace the net has run in. The subnets of If and Loop
(the arguments then_branch, else_branch, body) are drawn as clusters inside the drawing,
and ops placed on a CUDA device are filled in another colour, named in a legend line.

Rendering needs the `graphviz` Python package (pip install "netbrew[draw]") and, for
.svg/.png/.pdf, Graphviz's `dot` program; without `dot` the .dot source is written instead.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from netbrew.netdef.dataflow import Dataflow, blob_dataflow, op_dataflow
from netbrew.proto.netbrew_pb2 import PROTO_CUDA, NetDef, OperatorDef, TensorProto, TensorShape

INSTALL_HINT = (
    "Graphviz's `dot` program was not found, so the graph was written as DOT source; "
    "install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz) "
    "and render it with: dot -Tsvg {dot} -o {target}"
)
SUBNET_ARGS = ("then_branch", "else_branch", "body")
CPU_FILL, CUDA_FILL = "#EEEEEE", "#B5E3A1"
FORMATS = ("svg", "png", "pdf", "dot", "gv")


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise ImportError(
            'drawing nets needs the graphviz package: pip install "netbrew[draw]"'
        ) from None
    return graphviz


def _as_netdef(net: Any) -> NetDef:
    return net.proto() if hasattr(net, "proto") else net


def format_shape(info: TensorShape) -> str:
    """`float[1,3,224,224]`; symbolic dimensions by name, unknown ones as `?`."""
    if info.unknown_shape:
        return "?"
    dims = []
    for i, d in enumerate(info.dims):
        name = info.dim_names[i] if i < len(info.dim_names) else ""
        dims.append(name or ("?" if i in info.unknown_dims else str(d)))
    try:
        dtype = TensorProto.DataType.Name(info.data_type).lower()
    except ValueError:
        dtype = ""
    return f"{dtype}[{','.join(dims)}]"


def _array_shape(value: Any) -> str | None:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None:
        return None
    name = getattr(dtype, "name", str(dtype) if dtype is not None else "")
    return f"{'float' if name == 'float32' else name}[{','.join(str(d) for d in shape)}]"


def shape_labels(net: NetDef, value_info: Any = None, workspace: Any = None) -> dict[str, str]:
    """Blob name -> shape text, from the net's (and its subnets') value_info, then the
    caller's value_info (TensorShapes, or {name: TensorShape, shape tuple or text}), then
    the blobs the workspace holds (those win: they are what a run produced)."""
    labels: dict[str, str] = {}

    def from_net(n: NetDef) -> None:
        for info in n.value_info:
            labels[info.name] = format_shape(info)
        for op in n.op:
            for sub in _subnets(op):
                from_net(sub[1])

    from_net(net)
    if value_info is not None:
        items = value_info.items() if isinstance(value_info, Mapping) else value_info
        for item in items:
            if isinstance(item, TensorShape):
                labels[item.name] = format_shape(item)
                continue
            name, shape = item
            if isinstance(shape, TensorShape):
                labels[name] = format_shape(shape)
            elif isinstance(shape, str):
                labels[name] = shape
            else:
                labels[name] = "[" + ",".join(str(d) for d in shape) + "]"
    if workspace is not None:
        for name in workspace.blobs():
            try:
                text = _array_shape(workspace.fetch_blob(name))
            except Exception:  # a blob that is not an array (a net, a queue, ...)
                text = None
            if text is not None:
                labels[name] = text
    return labels


def _subnets(op: OperatorDef) -> list[tuple[str, NetDef]]:
    return [(a.name, a.n) for a in op.arg if a.name in SUBNET_ARGS and a.HasField("n")]


def _on_cuda(op: OperatorDef, net: NetDef) -> bool:
    if op.HasField("device_option"):
        return op.device_option.device_type == PROTO_CUDA
    return net.HasField("device_option") and net.device_option.device_type == PROTO_CUDA


class _Builder:
    def __init__(self, minimal: bool, labels: dict[str, str]) -> None:
        self.minimal, self.labels = minimal, labels
        self.cuda_seen = False
        self.clusters = 0
        self.ids: dict[str, str] = {}

    def gid(self, key: str) -> str:
        """A plain DOT id per node (the graphviz package reads `a:b` as node a, port b)."""
        return self.ids.setdefault(key, f"n{len(self.ids)}")

    def add_net(self, graph: Any, net: NetDef, prefix: str) -> None:
        flow: Dataflow = op_dataflow(net) if self.minimal else blob_dataflow(net)
        ops = list(net.op)
        writers = self._writers(ops)
        for node_id, (kind, label) in flow.nodes.items():
            if kind == "op":
                op = ops[int(node_id.split(":")[1])]
                cuda = _on_cuda(op, net)
                self.cuda_seen |= cuda
                graph.node(
                    self.gid(prefix + node_id),
                    label=label + ("\n[CUDA]" if cuda else ""),
                    shape="box",
                    style="filled,rounded",
                    fillcolor=CUDA_FILL if cuda else CPU_FILL,
                )
            else:
                graph.node(self.gid(prefix + node_id), label=label, shape="ellipse")
        produced = {dst for src, dst in flow.edges if src.startswith("op:")}
        for src, dst in flow.edges:
            graph.edge(
                self.gid(prefix + src),
                self.gid(prefix + dst),
                **self._edge_label(src, dst, produced, writers),
            )
        for index, op in enumerate(ops):
            for arg_name, sub in _subnets(op):
                self.clusters += 1
                sub_prefix = f"{prefix}{index}.{arg_name}/"
                with graph.subgraph(name=f"cluster_{self.clusters}") as cluster:
                    cluster.attr(
                        label=f"#{index} {op.type}: {arg_name}",
                        style="dashed",
                        color="#666666",
                        fontsize="11",
                    )
                    self.add_net(cluster, sub, sub_prefix)
                    first = sub_prefix + ("op:0" if sub.op else "empty")
                    if not sub.op:  # an empty branch still gets a cluster
                        cluster.node(self.gid(first), label="(no ops)", shape="plaintext")
                graph.edge(
                    self.gid(f"{prefix}op:{index}"),
                    self.gid(first),
                    lhead=f"cluster_{self.clusters}",
                    style="dashed",
                    arrowhead="odot",
                    label=arg_name,
                    fontsize="9",
                )

    @staticmethod
    def _writers(ops: list[OperatorDef]) -> dict[tuple[str, str], list[str]]:
        """(writer op node, reader op node) -> the blobs that edge carries (minimal view)."""
        carried: dict[tuple[str, str], list[str]] = {}
        writer: dict[str, str] = {}
        for index, op in enumerate(ops):
            node = f"op:{index}"
            for b in dict.fromkeys(op.input):
                if b in writer:
                    carried.setdefault((writer[b], node), []).append(b)
            for b in op.output:
                writer[b] = node
        return carried

    def _edge_label(self, src: str, dst: str, produced: set, carried: dict) -> dict[str, str]:
        if not self.labels:
            return {}
        if self.minimal:
            parts = [
                f"{b} {self.labels[b]}" if b in self.labels else b
                for b in carried.get((src, dst), [])
            ]
            text = "\n".join(parts)
        elif src.startswith("op:"):  # an op writes a blob: the blob's shape
            text = self.labels.get(_blob_name(dst), "")
        elif src not in produced:  # a blob no op of this net writes: a feed or a weight
            text = self.labels.get(_blob_name(src), "")
        else:
            text = ""
        return {"label": text, "fontsize": "9", "fontcolor": "#1F4E99"} if text else {}


def _blob_name(node_id: str) -> str:
    name = node_id[len("blob:") :]
    head, sep, tail = name.rpartition("#")
    return head if sep and tail.isdigit() else name


def to_graphviz(
    net: Any,
    *,
    minimal: bool = False,
    shapes: bool = True,
    value_info: Any = None,
    workspace: Any = None,
    rankdir: str = "TB",
):
    """The net as a graphviz.Digraph; see `draw`."""
    graphviz = _graphviz()
    net = _as_netdef(net)
    labels = shape_labels(net, value_info, workspace) if shapes else {}
    graph = graphviz.Digraph(net.name or "net")
    graph.attr(rankdir=rankdir, compound="true", fontname="Helvetica", fontsize="12")
    graph.attr("node", fontname="Helvetica", fontsize="11")
    graph.attr("edge", fontname="Helvetica")
    builder = _Builder(minimal, labels)
    builder.add_net(graph, net, "")
    legend = f"{net.name or 'net'}: {len(net.op)} ops"
    if builder.cuda_seen:
        legend += "    legend: grey box = CPU op, green box = CUDA op"
    graph.attr(label=legend, labelloc="b", labeljust="l")
    return graph


def draw(
    net: Any,
    path: str | Path,
    *,
    minimal: bool = False,
    shapes: bool = True,
    value_info: Iterable[TensorShape] | Mapping[str, Any] | None = None,
    workspace: Any = None,
    rankdir: str = "TB",
) -> Path:
    """Draws `net` (a NetDef or a Net) to `path`; the format follows its suffix (.svg,
    .png, .pdf, or .dot/.gv for the DOT source).

    Args:
        minimal: ops only, an edge from each op to the ops that read what it wrote.
        shapes: label edges with the blobs' shapes where known (from the net's value_info,
            `value_info`, and `workspace`).
        value_info: more shapes: TensorShapes, or {blob: TensorShape, shape tuple or text}.
        workspace: a Workspace the net has run in; the shapes of the blobs it holds.
        rankdir: Graphviz's layout direction ("TB" top to bottom, "LR" left to right).

    Returns:
        The file written: `path`, or, when Graphviz's `dot` is not installed, `path` with
        the suffix .dot (and a hint on installing Graphviz goes to stderr).
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"{path}: cannot draw to .{fmt}; use one of .{', .'.join(FORMATS)}")
    graph = to_graphviz(
        net,
        minimal=minimal,
        shapes=shapes,
        value_info=value_info,
        workspace=workspace,
        rankdir=rankdir,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt in ("dot", "gv"):
        path.write_text(graph.source)
        return path
    if shutil.which("dot") is None:
        dot_path = path.with_suffix(".dot")
        dot_path.write_text(graph.source)
        print(INSTALL_HINT.format(dot=dot_path, target=path), file=sys.stderr)
        return dot_path
    path.write_bytes(graph.pipe(format=fmt))
    return path
