"""An exported model lowered to an older default-domain opset.

onnx.version_converter does the lowering. Before it runs, ops that the target opset does
not have are written in older ops where ONNX defines them that way (Gelu, from opset 20,
is 0.5 x (1 + erf(x / sqrt 2)) or its tanh form); any op still missing is refused with
every such op named, where the converter would fail on the first with a C++ assertion.
"""

from __future__ import annotations

import math
import re

import numpy as np
import onnx
from onnx import helper, numpy_helper, version_converter

from netbrew.errors import UnsupportedConversion

OLDEST = 7  # the oldest default-domain opset netbrew imports and exports


def lower(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """`model` (at the newest default-domain opset) at `opset`.

    Raises:
        UnsupportedConversion: opset out of range, ops the opset lacks, or an op the
            version converter cannot move down (named, with the versions).
    """
    newest = onnx.defs.onnx_opset_version()
    if not OLDEST <= opset <= newest:
        raise UnsupportedConversion(
            f"opset {opset}: the installed onnx {onnx.__version__} knows default-domain "
            f"opsets {OLDEST} to {newest}"
        )
    if opset == newest:
        return model
    graph = model.graph
    if opset < 20 and any(n.op_type == "Gelu" and not n.domain for n in graph.node):
        nodes = []
        for node in graph.node:
            nodes += _gelu(node) if node.op_type == "Gelu" and not node.domain else [node]
        del graph.node[:]
        graph.node.extend(nodes)
    missing: dict[str, int] = {}
    for node in graph.node:
        if not node.domain and not _exists(node.op_type, opset):
            since = onnx.defs.get_schema(node.op_type).since_version
            missing[f"{node.op_type} (from opset {since})"] = 0
    if missing:
        raise UnsupportedConversion(
            f"cannot export to opset {opset}: it has no {', '.join(missing)}; export at a "
            "newer opset"
        )
    return _convert(model, opset)


HELD = "netbrew.held"
"""The domain that keeps nodes out of the version converter's way (see _convert)."""
_NO_ADAPTER = re.compile(r"No Adapter (?:From|For|To) Version \$?(\d+) for (\w+)")


def _convert(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """onnx.version_converter's lowering, where ops it has no adapter for are held out
    of its way and put back unchanged, if the older opset's op reads them alike.

    The converter has adapters where an op's meaning changed between versions; most of
    the ones it lacks are versions that only allowed more types (Mul 14, BatchNormalization
    15): a node whose inputs, outputs and set attributes the older op accepts means the
    same there (attributes the older op lacks may only hold their default)."""
    held: set[str] = set()
    while True:
        work = onnx.ModelProto()
        work.CopyFrom(model)
        for node in work.graph.node:
            if node.op_type in held and not node.domain:
                node.domain = HELD
        if held:
            work.opset_import.append(helper.make_opsetid(HELD, 1))
        try:
            lowered = version_converter.convert_version(work, opset)
        except RuntimeError as e:
            found = _NO_ADAPTER.search(str(e))
            op_type = found.group(2) if found else None
            if op_type and op_type not in held and _holdable(model.graph, op_type, opset):
                held.add(op_type)
                continue
            raise UnsupportedConversion(
                f"onnx.version_converter cannot lower this model to opset {opset}: "
                f"{str(e).rsplit('failed:', 1)[-1].strip()}; export at a newer opset"
            ) from e
        break
    for node in lowered.graph.node:
        if node.domain == HELD:
            node.domain = ""
            known = onnx.defs.get_schema(node.op_type, opset, "").attributes
            kept = [a for a in node.attribute if a.name in known]
            del node.attribute[:]
            node.attribute.extend(kept)
    kept_ids = [o for o in lowered.opset_import if o.domain != HELD]
    del lowered.opset_import[:]
    lowered.opset_import.extend(kept_ids)
    return lowered


def _holdable(graph: onnx.GraphProto, op_type: str, opset: int) -> bool:
    """Whether every `op_type` node reads the same as the op at `opset` (see _convert)."""
    if not _exists(op_type, opset):
        return False
    old, new = onnx.defs.get_schema(op_type, opset, ""), onnx.defs.get_schema(op_type)
    for node in graph.node:
        if node.op_type != op_type or node.domain:
            continue
        ins, outs = len(node.input), len([o for o in node.output if o])
        if not (old.min_input <= ins <= old.max_input and old.min_output <= outs <= old.max_output):
            return False
        for attr in node.attribute:
            if attr.name in old.attributes:
                continue
            default = (
                new.attributes[attr.name].default_value if attr.name in new.attributes else None
            )
            if default is None or not default.name:
                return False
            if helper.get_attribute_value(attr) != helper.get_attribute_value(default):
                return False
    return True


def _exists(op_type: str, opset: int) -> bool:
    try:
        onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    return True


def _gelu(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Gelu's definition in older ops, its output keeping the node's name."""
    x, y = node.input[0], node.output[0]
    approximate = next((a.s.decode() for a in node.attribute if a.name == "approximate"), "none")
    stem = f"{node.name or y}_gelu"

    def const(tag: str, value: float) -> tuple[str, onnx.NodeProto]:
        name = f"{stem}_{tag}"
        tensor = numpy_helper.from_array(np.array(value, np.float32), name)
        return name, helper.make_node("Constant", [], [name], value=tensor)

    half, half_op = const("half", 0.5)
    one, one_op = const("one", 1.0)
    nodes = [half_op, one_op]
    if approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        k, k_op = const("k", math.sqrt(2.0 / math.pi))
        c, c_op = const("c", 0.044715)
        nodes += [k_op, c_op]
        steps = [  # x^3 as x * (x * x): Pow has no downgrade adapter
            ("Mul", [x, x], "square"),
            ("Mul", [x, f"{stem}_square"], "cube"),
            ("Mul", [f"{stem}_cube", c], "cubic"),
            ("Add", [x, f"{stem}_cubic"], "inner"),
            ("Mul", [f"{stem}_inner", k], "scaled"),
            ("Tanh", [f"{stem}_scaled"], "curve"),
        ]
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        root, root_op = const("root2", math.sqrt(2.0))
        nodes.append(root_op)
        steps = [("Div", [x, root], "scaled"), ("Erf", [f"{stem}_scaled"], "curve")]
    steps += [
        ("Add", [f"{stem}_curve", one], "shifted"),
        ("Mul", [x, f"{stem}_shifted"], "product"),
    ]
    nodes += [helper.make_node(op, ins, [f"{stem}_{out}"]) for op, ins, out in steps]
    nodes.append(helper.make_node("Mul", [f"{stem}_product", half], [y], name=node.name))
    return nodes
