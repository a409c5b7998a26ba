"""NetDef -> ONNX ModelProto.

ONNX ops are copied as they are (their semantics are ONNX's). netbrew-only ops go
through the converters in to_onnx.py (FC becomes Flatten + Gemm). The init net is run
once and every parameter it fills becomes an initializer; netbrew-only ops whose inputs
are all constants (fillers in a predict net) are folded the same way. Blob names become
value names unchanged. The result passes onnx.checker.check_model(full_check=True).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from netbrew.converters.onnx.lower_opset import lower
from netbrew.converters.onnx.to_onnx import CONVERTERS, NOT_EXPORTABLE
from netbrew.errors import UnsupportedConversion
from netbrew.executor import Workspace
from netbrew.netdef.args import arg_value
from netbrew.netdef.dtypes import ONNX_TYPE_ARGS, onnx_code
from netbrew.operators import get_schema
from netbrew.proto.netbrew_pb2 import Argument, NetDef, OperatorDef

A = onnx.AttributeProto
InputSpec = Mapping[str, Any] | Sequence[str]


def _netdef(net: Any) -> NetDef:
    return net.proto() if hasattr(net, "proto") else net


def _attribute(op: OperatorDef, arg: Argument, onnx_schema) -> onnx.AttributeProto:
    """An Argument as an ONNX attribute of the type the ONNX schema declares."""
    value = arg_value(arg)
    declared = onnx_schema.attributes.get(arg.name) if onnx_schema else None
    kind = declared.type if declared is not None else None
    if isinstance(value, NetDef):
        return helper.make_attribute(arg.name, graph_from_net(value))
    if isinstance(value, list) and value and isinstance(value[0], NetDef):
        return helper.make_attribute(arg.name, [graph_from_net(n) for n in value])
    if isinstance(value, np.ndarray):
        return helper.make_attribute(arg.name, numpy_helper.from_array(value))
    if kind == A.INT and isinstance(value, str) and ONNX_TYPE_ARGS.get(op.type) == arg.name:
        value = onnx_code(value)  # a type stored by name ("INT32"): ONNX wants its number
    elif kind == A.FLOAT:
        value = float(value)
    elif kind == A.FLOATS:
        value = [float(v) for v in value]
    elif kind == A.INTS:
        value = [int(v) for v in value]
    elif kind == A.STRINGS:
        value = [v if isinstance(v, (str, bytes)) else str(v) for v in value]
    elif kind == A.TENSOR and not isinstance(value, np.ndarray):
        value = numpy_helper.from_array(np.asarray(value))
    if isinstance(value, list) and not value:
        return helper.make_attribute(arg.name, [], attr_type=kind or A.INTS)
    return helper.make_attribute(arg.name, value)


DOMAIN_OPSETS = {"ai.onnx.ml": 5, "ai.onnx.preview.training": 1}
"""The opset version exported for each non-default domain that has its own numbering."""


def _copy_node(op: OperatorDef) -> onnx.NodeProto:
    domain = op.domain if op.domain not in ("", "caffe2") else ""
    try:
        onnx_schema = onnx.defs.get_schema(op.type, domain=domain)
    except onnx.defs.SchemaError:
        onnx_schema = None
    node = helper.make_node(op.type, list(op.input), list(op.output), name=op.name or None)
    if domain:
        node.domain = domain
    node.attribute.extend(_attribute(op, arg, onnx_schema) for arg in op.arg)
    return node


def graph_from_net(net: NetDef, name: str | None = None) -> onnx.GraphProto:
    """A subgraph (If/Loop/Scan body): inputs and outputs untyped, as ONNX allows."""
    nodes, inits, _ = _convert_ops(net, {})
    infos = {v.name: v for v in net.value_info}
    return helper.make_graph(
        nodes,
        name or net.name or "subgraph",
        [_subgraph_value(n, infos) for n in net.external_input],
        [_subgraph_value(n, infos) for n in net.external_output],
        inits,
    )


def _subgraph_value(name: str, infos: Mapping[str, Any]) -> onnx.ValueInfoProto:
    """Typed where the net's value_info knows the type (onnxruntime needs Loop bodies'
    input types), unknown dims left symbolic; else untyped."""
    from netbrew.netdef.tensor import dtype_of

    info = infos.get(name)
    if info is None or info.unknown_shape:
        return helper.make_empty_tensor_value_info(name)
    unknown = set(info.unknown_dims)
    shape = [None if i in unknown else int(d) for i, d in enumerate(info.dims)]
    elem = helper.np_dtype_to_tensor_dtype(dtype_of(info.data_type))
    return helper.make_tensor_value_info(name, elem, shape)


def _reads(node: onnx.NodeProto) -> set[str]:
    """The node's inputs and what its subgraphs (If, Loop, Scan) read from outer scopes."""
    names = set(node.input)
    for attr in node.attribute:
        for graph in [attr.g, *attr.graphs] if attr.g.node or attr.graphs else []:
            for inner in graph.node:
                names |= _reads(inner)
    return names


def _convert_ops(net: NetDef, constants: dict[str, np.ndarray]):
    nodes, inits, problems = [], [], []
    folded = Workspace()
    for name, value in constants.items():
        folded.feed_blob(name, value)
    for index, op in enumerate(net.op):
        where = f"op #{index} {op.type}"
        if op.type in NOT_EXPORTABLE or op.is_gradient_op or op.type.endswith("Gradient"):
            reason = NOT_EXPORTABLE.get(op.type, "a gradient op, part of training only")
            problems.append(f"{where}: {reason}")
            continue
        schema = get_schema(op.type)
        if schema.onnx:
            nodes.append(_copy_node(op))
        elif op.type in CONVERTERS:
            converted = CONVERTERS[op.type](op)
            nodes.extend(converted.nodes)
            inits.extend(converted.initializers)
        elif all(folded.has_blob(i) for i in op.input if i):
            folded.run_operator_once(op)  # e.g. a filler: its result is a constant
            for out in op.output:
                inits.append(numpy_helper.from_array(folded.fetch_blob(out), out))
                constants[out] = folded.fetch_blob(out)
        else:
            problems.append(f"{where}: no ONNX converter for {op.type}")
    return nodes, inits, problems


def to_ssa(net: NetDef) -> tuple[NetDef, dict[str, str]]:
    """ONNX needs every value written once; netbrew and Caffe2 nets write blobs in place.

    The last write of a blob keeps its name (so outputs keep theirs); earlier writes are
    renamed `<blob>__<k>` and their readers follow. A net input written in place (Caffe2's
    `x = Relu(x)`) has every write renamed, since the graph input holds the name; an output
    that is such a blob is the last of them. Returns the net and the renames (new name ->
    original blob).
    """
    writes: dict[str, int] = {}
    for op in net.op:
        for out in op.output:
            writes[out] = writes.get(out, 0) + 1
    inputs = {b for b in net.external_input if b in writes}
    if all(n == 1 for n in writes.values()) and not inputs:
        return net, {}
    out_net = NetDef()
    out_net.CopyFrom(net)
    seen: dict[str, int] = {}
    current: dict[str, str] = {}
    renames: dict[str, str] = {}
    for op in out_net.op:
        for i, name in enumerate(op.input):
            op.input[i] = current.get(name, name)
        for i, name in enumerate(op.output):
            if not name:
                continue
            seen[name] = seen.get(name, 0) + 1
            if seen[name] < writes[name] or name in inputs:
                fresh = f"{name}__{seen[name]}"
                renames[fresh] = name
                op.output[i] = fresh
                current[name] = fresh
            else:
                current.pop(name, None)
    outputs = [current.get(b, b) if b in inputs else b for b in out_net.external_output]
    del out_net.external_output[:]
    out_net.external_output.extend(outputs)
    return out_net, renames


def _value_info(
    name: str, value: np.ndarray, dynamic_batch: bool, symbols: Mapping[int, str] | None = None
) -> onnx.ValueInfoProto:
    """The value's type and shape; `symbols` names its symbolic dims (axis -> name)."""
    shape: list[Any] = list(value.shape)
    for axis, symbol in (symbols or {}).items():
        shape[axis] = symbol
    if dynamic_batch and shape and 0 not in (symbols or {}):
        shape[0] = "batch"
    elem = helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, elem, shape)


def _output_info(name: str, value: np.ndarray, dynamic_batch: bool, symbols: dict):
    """An output's type; with symbolic inputs its shape is left to ONNX's shape inference
    (the example run's sizes would fix the symbolic dims to 1)."""
    if symbols:
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), None
        )
    return _value_info(name, value, dynamic_batch)


def _symbols(net: NetDef, inputs: InputSpec) -> dict[str, dict[int, str]]:
    """The symbolic dims of inputs given by name, from net.value_info: input -> {axis:
    its dim name, or `<input>_dim<axis>` where it has none}."""
    if isinstance(inputs, Mapping):
        return {}
    infos = {v.name: v for v in net.value_info}
    out = {}
    for name in inputs:
        info = infos.get(name)
        if info is None or info.unknown_shape:
            continue
        names = list(info.dim_names) + [""] * len(info.dims)
        found = {i: names[i] or f"{name}_dim{i}" for i, d in enumerate(info.dims) if d < 0}
        if found:
            out[name] = found
    return out


def _example_inputs(net: NetDef, inputs: InputSpec) -> dict[str, np.ndarray]:
    """Zero arrays for the inputs, from {name: shape or array} or from net.value_info
    (a symbolic dim is 1 here, and stays symbolic in the model: _symbols)."""
    if isinstance(inputs, Mapping):
        out = {}
        for name, spec in inputs.items():
            if isinstance(spec, np.ndarray):
                out[name] = spec
            else:
                shape, dtype = (
                    spec
                    if isinstance(spec, tuple)
                    and len(spec) == 2
                    and isinstance(spec[0], (list, tuple))
                    else (spec, np.float32)
                )
                out[name] = np.zeros(tuple(shape), dtype=dtype)
        return out
    from netbrew.netdef.tensor import dtype_of

    infos = {v.name: v for v in net.value_info}
    out = {}
    for name in inputs:
        if name not in infos or infos[name].unknown_shape:
            raise UnsupportedConversion(
                f"input {name!r}: give its shape (inputs={{'{name}': (1, 3, 224, 224)}}); "
                "the net has no value_info for it"
            )
        dims = [1 if d < 0 else d for d in infos[name].dims]
        out[name] = np.zeros(dims, dtype=dtype_of(infos[name].data_type))
    return out


def on_cpu(net: NetDef) -> NetDef:
    """A copy of `net` with every device option cleared (copies between devices run as
    host copies there)."""
    out = NetDef()
    out.CopyFrom(net)
    out.ClearField("device_option")
    for op in out.op:
        op.ClearField("device_option")
    return out


def export(
    predict_net: Any,
    init_net: Any = None,
    *,
    inputs: InputSpec,
    opset: int | None = None,
    dynamic_batch: bool = False,
    name: str | None = None,
) -> onnx.ModelProto:
    """Exports a netbrew model to ONNX.

    Args:
        predict_net: the inference net (Net or NetDef).
        init_net: the net that fills its parameters; they become initializers.
        inputs: the graph inputs: {name: shape} (float32), {name: (shape, dtype)},
            {name: example array}, or names whose shapes the net's value_info gives.
        opset: an older default-domain opset to lower to (lower_opset: Gelu written
            in older ops, then onnx.version_converter); default the newest the installed
            onnx knows.
        dynamic_batch: make dimension 0 of every input and output symbolic ("batch").
        name: the graph name (default the net's).

    Raises:
        UnsupportedConversion: listing every op that cannot be exported, or every op the
            opset lacks.
    """
    net, renames = to_ssa(_netdef(predict_net))
    ws = Workspace()
    if init_net is not None:
        ws.run_net_once(_netdef(init_net))
    examples, symbols = _example_inputs(net, inputs), _symbols(net, inputs)
    params = {b: ws.fetch_blob(b) for b in ws.blobs() if b not in examples}
    nodes, inits, problems = _convert_ops(net, dict(params))
    if problems:
        raise UnsupportedConversion(
            f"net {net.name!r} cannot be exported to ONNX:\n  " + "\n  ".join(problems)
        )
    used = {i for node in nodes for i in _reads(node)}
    initializers = [numpy_helper.from_array(v, k) for k, v in params.items() if k in used]
    initializers += [t for t in inits if t.name in used or t.name in net.external_output]
    for name_, value in examples.items():
        ws.feed_blob(name_, value)
    ws.run_net_once(on_cpu(net))  # the example run gives the outputs' types; ONNX has no devices
    outputs = list(net.external_output) or list(net.op[-1].output)
    graph = helper.make_graph(
        nodes,
        name or net.name or "netbrew",
        [_value_info(n, v, dynamic_batch, symbols.get(n)) for n, v in examples.items()],
        [_output_info(n, np.asarray(ws.fetch_blob(n)), dynamic_batch, symbols) for n in outputs],
        initializers,
    )
    domains = {n.domain for n in nodes if n.domain}
    newest = onnx.defs.onnx_opset_version()
    opsets = [helper.make_opsetid("", newest)] + [
        helper.make_opsetid(d, DOMAIN_OPSETS.get(d, newest)) for d in sorted(domains)
    ]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="netbrew")
    if renames:  # the name map, for the values ONNX's single assignment forced apart
        helper.set_model_props(model, {"netbrew.renamed": json.dumps(renames, sort_keys=True)})
    model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
    if opset is not None:
        model = lower(model, opset)
        model.ir_version = helper.find_min_ir_version_for(list(model.opset_import))
    model = shape_inference.infer_shapes(model)
    onnx.checker.check_model(model, full_check=True)
    return model
