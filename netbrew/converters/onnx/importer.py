"""ONNX ModelProto -> (init_net, predict_net).

Blob names are the ONNX value names, unchanged. Initializers become `Constant` ops in
the init net; graph inputs, outputs and value_info become the predict net's external
inputs, outputs and value_info (shape hints, symbolic dims kept by name). Subgraph
attributes (If, Loop, Scan bodies) become NetDef arguments. Models written for an older
opset are first upgraded to the newest one the installed onnx knows.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import onnx
from onnx import helper, version_converter

from netbrew.converters.onnx.attributes import tensor_to_array, to_argument
from netbrew.converters.onnx.gradient_op import expand_gradient_ops
from netbrew.errors import ModelLoadError
from netbrew.netdef.args import OVERRIDABLE
from netbrew.netdef.tensor import data_type_of, from_array
from netbrew.operators import onnx_training
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef, TensorShape

DEFAULT_DOMAINS = ("", "ai.onnx")


def load_onnx(
    model_or_path: onnx.ModelProto | str | os.PathLike,
) -> tuple[onnx.ModelProto, str | None]:
    """The model and the folder its external data lives in (None for in-memory models)."""
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path, None
    path = Path(model_or_path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_file() and path.stat().st_size == 0:
        # protobuf parses zero bytes as an empty ModelProto: an empty net, not an error
        raise ModelLoadError(f"{path}: empty file, expected an ONNX model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # onnx raises DecodeError, ValueError...
        raise ModelLoadError(f"{path}: not a valid ONNX model: {e}") from e
    if not model.HasField("graph") and not model.ir_version:
        raise ModelLoadError(f"{path}: not an ONNX model: it has neither a graph nor an IR version")
    return model, str(path.parent)


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset version; None when it imports none."""
    return next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), None)


def upgrade(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model at the newest default-domain opset, via onnx.version_converter.

    Where the converter cannot upgrade the model, it is returned as written; the
    kernels then see the older op versions (most are compatible).
    """
    target = onnx.defs.onnx_opset_version()
    current = default_opset(model) or target
    if current >= target:
        return model
    try:
        return version_converter.convert_version(model, target)
    except Exception as e:  # the converter raises bare RuntimeErrors without adapters
        warnings.warn(
            f"onnx.version_converter could not upgrade opset {current} to {target} ({e}); "
            "importing the ops as written",
            stacklevel=3,
        )
        return model


SCAN8_DOMAIN = "netbrew.scan8"
"""Where hold_opset8_scans puts opset-8 Scans, out of onnx.version_converter's reach."""


def hold_opset8_scans(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with its opset-8 Scans (batch axis 0, sequence axis 1) moved to
    SCAN8_DOMAIN, where the version converter leaves them, and imported as Scan8.

    The converter's 8 -> 9 adapter relabels a Scan without moving its batch axis, so the
    upgraded op would scan the batch. Each held Scan's body is upgraded on its own (kept as
    written where that fails). Top-level Scans only: opset 8 has no If or Loop bodies
    that hold one in the models seen."""
    current = default_opset(model)
    scans = [n for n in model.graph.node if n.op_type == "Scan" and n.domain in DEFAULT_DOMAINS]
    if current is None or current >= 9 or not scans:
        return model
    held = onnx.ModelProto()
    held.CopyFrom(model)
    target = onnx.defs.onnx_opset_version()
    for node in held.graph.node:
        if node.op_type != "Scan" or node.domain not in DEFAULT_DOMAINS:
            continue
        node.domain = SCAN8_DOMAIN
        for attr in node.attribute:
            if attr.name == "body":
                body = helper.make_model(attr.g, opset_imports=[helper.make_opsetid("", current)])
                try:
                    attr.g.CopyFrom(version_converter.convert_version(body, target).graph)
                except Exception:  # noqa: BLE001  (the converter raises bare RuntimeErrors)
                    pass  # the body's ops as written; most read the same at any opset
    held.opset_import.append(helper.make_opsetid(SCAN8_DOMAIN, 1))
    return held


def shape_info(value: onnx.ValueInfoProto) -> TensorShape | None:
    """A TensorShape for a tensor-typed value (None for sequences, maps, optionals)."""
    if not value.type.HasField("tensor_type"):
        return None
    tensor = value.type.tensor_type
    info = TensorShape(name=value.name)
    try:
        info.data_type = data_type_of(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    except (ValueError, KeyError, TypeError):
        info.data_type = 0
    if not tensor.HasField("shape"):
        info.unknown_shape = True
        return info
    for i, dim in enumerate(tensor.shape.dim):
        if dim.HasField("dim_value"):
            info.dims.append(dim.dim_value)
            info.dim_names.append("")
        else:
            info.dims.append(-1)
            info.unknown_dims.append(i)
            info.dim_names.append(dim.dim_param)
    return info


def graph_to_net(graph: onnx.GraphProto, base_dir: str | None = None) -> tuple[NetDef, NetDef]:
    """(init_net, net) for one graph; the init net holds its initializers."""
    init = NetDef(name=f"{graph.name}_init")
    for tensor in graph.initializer:
        array = tensor_to_array(tensor, base_dir)
        op = init.op.add(type="Constant", output=[tensor.name])
        op.arg.add(name="value").t.CopyFrom(from_array(array, raw=True))
    for sparse in graph.sparse_initializer:
        from netbrew.converters.onnx.attributes import _dense

        op = init.op.add(type="Constant", output=[sparse.values.name])
        op.arg.add(name="value").t.CopyFrom(from_array(_dense(sparse), raw=True))
    init.external_output.extend(op.output[0] for op in init.op)

    def subgraph(g: onnx.GraphProto) -> NetDef:
        sub_init, sub = graph_to_net(g, base_dir)
        merged = NetDef()
        merged.CopyFrom(sub)
        del merged.op[:]
        merged.op.extend(list(sub_init.op) + list(sub.op))
        del merged.external_input[:]  # only the formal inputs; the rest is outer scope
        merged.external_input.extend(v.name for v in g.input)
        return merged

    net = NetDef(name=graph.name)
    params = set(init.external_output)
    net.external_input.extend(v.name for v in graph.input if v.name not in params)
    net.external_input.extend(init.external_output)
    net.external_output.extend(v.name for v in graph.output)
    for value in [*graph.input, *graph.output, *graph.value_info]:
        info = shape_info(value)
        if info is not None and value.name not in params:
            net.value_info.append(info)
    for node in graph.node:
        net.op.append(node_to_op(node, subgraph))
    expand_gradient_ops(net)
    return init, net


def node_to_op(node: onnx.NodeProto, subgraph=None) -> OperatorDef:
    """One ONNX node as an OperatorDef (same type, names and attributes)."""
    op_type, domain = node.op_type, node.domain
    if domain == onnx_training.DOMAIN:  # Adam and the others clash with Caffe2's
        op_type = onnx_training.NAMES.get(op_type, op_type)
    elif domain == SCAN8_DOMAIN:  # see hold_opset8_scans
        op_type, domain = "Scan8", ""
    op = OperatorDef(type=op_type, input=node.input, output=node.output)
    if node.name:
        op.name = node.name
    if domain not in DEFAULT_DOMAINS:
        op.domain = domain
    convert = subgraph or (lambda g: graph_to_net(g)[1])
    op.arg.extend(to_argument(attr, convert) for attr in node.attribute)
    return op


def import_model(
    model_or_path: onnx.ModelProto | str | os.PathLike,
    *,
    upgrade_opset: bool = True,
    infer_shapes: bool = True,
    hoist_constants: bool = True,
) -> tuple[NetDef, NetDef]:
    """Converts an ONNX model into (init_net, predict_net).

    Args:
        model_or_path: a ModelProto or a path to a .onnx file (external data is read
            relative to the file).
        upgrade_opset: upgrade older opsets to the newest definitions first.
        infer_shapes: run onnx's shape inference first, so the predict net's value_info
            also gives the intermediate blobs' shapes (the inference passes size their
            work by them). Only a hint: a model that shape inference cannot process is
            imported as it is.
        hoist_constants: move the ops that read only initializers (weights a model builds
            in its graph, e.g. ConstantOfShape -> Mul) into the init net, so they run once
            and every entry point (Predictor, the ONNX backend, `netbrew run`) gets the
            same net. ONNX initializers are constants, except those a model of IR version
            4 or later also lists as graph inputs (overridable defaults).
    """
    model, base_dir = load_onnx(model_or_path)
    model = hold_opset8_scans(model)
    if upgrade_opset:
        model = upgrade(model)
    if infer_shapes:
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except (onnx.shape_inference.InferenceError, ValueError):
            pass  # the model fails or runs on its own merits, without the hint
    init, net = graph_to_net(model.graph, base_dir)
    net.name = model.graph.name or "onnx_model"
    init.name = f"{net.name}_init"
    # From IR version 4 an initializer that is also a graph input is an overridable
    # default; before that every initializer had to be listed among the inputs.
    overridable = {i.name for i in model.graph.input} if model.ir_version >= 4 else set()
    overridable &= set(init.external_output)
    if overridable:  # the inference passes must not fold them as constants
        net.arg.add(name=OVERRIDABLE, strings=[b.encode() for b in sorted(overridable)])
    if hoist_constants:
        hoist(init, net, {b for b in init.external_output if b not in overridable})
    return init, net


def hoist(init: NetDef, net: NetDef, constants: set[str]) -> list[OperatorDef]:
    """Moves the ops of `net` whose inputs are all `constants` (or outputs of ops already
    moved) into `init`, in order; their outputs become the init net's outputs and the
    predict net's inputs. Random ops and ops that read the enclosing scope stay.

    Returns:
        The moved ops.
    """
    from netbrew.operators import SCHEMAS

    known = set(constants)
    moved, kept = [], []
    for op in net.op:
        schema = SCHEMAS.get(op.type)
        pure = schema is not None and not (schema.rng or schema.wants_scope or schema.wants_names)
        if pure and all(not b or b in known for b in op.input):
            moved.append(op)
            known.update(b for b in op.output if b)
        else:
            kept.append(op)
    if moved:
        del net.op[:]
        net.op.extend(kept)
        init.op.extend(moved)
        outputs = [b for op in moved for b in op.output if b]
        init.external_output.extend(outputs)
        net.external_input.extend(b for b in outputs if b not in net.external_input)
    return moved
