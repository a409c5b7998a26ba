"""Model folders: `init_net.pb` (parameters as fills) + `predict_net.pb` (inference net).

nb.save_model("lenet/", ws, model, inputs=["data"], outputs=["prob"])
predictor = nb.load_model("lenet/")
predictor.run({"data": x})
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netbrew.netdef.args import args_dict
from netbrew.netdef.net import Net, op_def
from netbrew.netdef.serialize import load_net, save_net
from netbrew.netdef.tensor import data_type_of
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef, TensorShape


def forward_ops(net: NetDef) -> list[OperatorDef]:
    """The ops before the first gradient op: the model without backward and updates."""
    ops = []
    for op in net.op:
        if op.is_gradient_op:
            break
        ops.append(op)
    return ops


def to_inference(op: OperatorDef, needed: set[str] | None = None) -> list[OperatorDef]:
    """`op` switched to inference (BatchNormalization, Dropout): a copy, or the ops that
    compute what inference needs of it (SoftmaxWithLoss's softmax, without its labels)."""
    if op.type == "SoftmaxWithLoss" and needed is not None and op.output[1] not in needed:
        return _softmax_of(op)
    out = OperatorDef()
    out.CopyFrom(op)
    if op.type == "BatchNormalization" and args_dict(op.arg).get("training_mode"):
        for arg in out.arg:
            if arg.name == "training_mode":
                arg.i = 0
        del out.output[1:]
    elif op.type == "Dropout":
        del out.input[1:]
        del out.output[1:]
    return [out]


def _softmax_of(op: OperatorDef) -> list[OperatorDef]:
    """SoftmaxWithLoss's softmax output alone: Softmax over the logits flattened to 2-D
    at `axis`, in the logits' shape."""
    logits, softmax = op.input[0], op.output[0]
    axis = int(args_dict(op.arg).get("axis", 1))
    flat, probs, shape = (f"{softmax}__{tag}" for tag in ("flat", "probs", "shape"))
    return [
        op_def("Flatten", [logits], [flat], axis=axis),
        op_def("Softmax", [flat], [probs], axis=1),
        op_def("Shape", [logits], [shape]),
        op_def("Reshape", [probs, shape], [softmax]),
    ]


def inference_net(
    net: Any, inputs: Sequence[str], outputs: Sequence[str], name: str | None = None
) -> NetDef:
    """The ops of `net`'s forward part needed to compute `outputs` from `inputs`, in
    inference mode, with external inputs (feeds, then parameters) and outputs declared."""
    proto = net.proto() if hasattr(net, "proto") else net
    needed, kept = set(outputs), []
    for op in reversed(forward_ops(proto)):
        if needed & set(op.output):
            for new in reversed(to_inference(op, needed)):
                needed -= set(new.output)
                needed |= {b for b in new.input if b and b not in inputs}
                kept.append(new)
    result = NetDef(name=name or proto.name, external_output=list(outputs))
    result.op.extend(reversed(kept))
    params = []
    produced: set[str] = set()
    for op in result.op:
        params += [b for b in op.input if b and b not in produced and b not in inputs]
        produced.update(op.output)
    result.external_input.extend(list(inputs) + list(dict.fromkeys(params)))
    return result


def _input_info(name: str, value: np.ndarray) -> TensorShape:
    dims = list(value.shape)
    info = TensorShape(name=name, dims=dims, data_type=data_type_of(value.dtype))
    if dims:
        info.unknown_dims.append(0)
        info.dim_names.extend(["batch"] + [""] * (len(dims) - 1))
    return info


def save_model(
    directory: str | os.PathLike,
    workspace: Any,
    model: Any,
    inputs: Sequence[str],
    outputs: Sequence[str],
) -> Path:
    """Writes `init_net.pb` (the trained parameters as fill ops) and `predict_net.pb`.

    The predict net is pruned to the path from `inputs` to `outputs` and switched to
    inference mode; its value_info records each input's dtype and rank (batch symbolic).
    Both writes are atomic. In a data-parallel job (netbrew.distributed) rank 0 writes and
    every rank waits for the write, so each may load the folder afterwards.

    Args:
        directory: the folder to write (created if missing).
        workspace: the Workspace holding the trained parameters.
        model: a ModelHelper, Net or NetDef.
        inputs: the feeds of the exported net.
        outputs: the blobs it returns.
    """
    from netbrew.brew.initializers import add_given_fill

    net = model.net if hasattr(model, "param_init_net") else model
    name = getattr(model, "name", None) or (net.proto() if hasattr(net, "proto") else net).name
    predict = inference_net(net, inputs, outputs, name=name)
    init = Net(f"{predict.name}_init")
    for blob in predict.external_input[len(inputs) :]:
        add_given_fill(init, blob, workspace.fetch_blob(blob))
    for blob in inputs:
        if workspace.has_blob(blob):
            predict.value_info.append(_input_info(blob, np.asarray(workspace.fetch_blob(blob))))
    folder = Path(directory)
    from netbrew.distributed.world import current

    world = current()
    if world is None or world.rank == 0:
        save_net(init, folder / "init_net.pb")
        save_net(predict, folder / "predict_net.pb")
    if world is not None and world.size > 1:
        from netbrew.distributed import barrier

        barrier()
    return folder


def load_model(directory: str | os.PathLike, **predictor_args: Any):
    """A Predictor for a folder written by save_model (or any init/predict pair)."""
    from netbrew.executor.predictor import Predictor

    folder = Path(directory)
    return Predictor(
        load_net(folder / "init_net.pb"), load_net(folder / "predict_net.pb"), **predictor_args
    )
