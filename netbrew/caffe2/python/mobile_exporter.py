"""caffe2.python.mobile_exporter on netbrew: a trained net as an (init_net, predict_net)
pair, the parameters' current values written into the init net as fill ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.brew.initializers import add_given_fill
from netbrew.caffe2.python.core import canonical_proto
from netbrew.netdef.net import Net
from netbrew.proto.netbrew_pb2 import NetDef


def Export(workspace: Any, net: Any, params: Any) -> tuple[NetDef, NetDef]:  # noqa: N802
    """(init_net, predict_net) for `net`, with `params` read from `workspace` (Caffe2's
    workspace module, or anything with FetchBlob).

    As Caffe2's exporter did, the predict net's external inputs become the blobs it reads
    before writing them (the feeds first, then the parameters) and its external outputs
    the blobs it writes and never reads."""
    params = [str(p) for p in params]
    predict = canonical_proto(net.proto() if hasattr(net, "proto") else net)
    init = Net(f"{predict.name}_init")
    for name in params:
        add_given_fill(init, name, np.asarray(workspace.FetchBlob(name)))
    feeds, outputs = _feeds_and_outputs(predict)
    inputs = [b for b in feeds if b not in params]
    inputs += [b for b in [*predict.external_input, *params] if b not in inputs]
    predict.external_input[:] = list(dict.fromkeys(inputs))
    predict.external_output[:] = outputs
    init_proto = init.proto()
    init_proto.external_output.extend(params)
    return init_proto, predict


def _feeds_and_outputs(net: NetDef) -> tuple[list[str], list[str]]:
    """Blobs read before any op writes them, and blobs written but never read, in order."""
    written: set[str] = set()
    read: set[str] = set()
    feeds: list[str] = []
    for op in net.op:
        for b in op.input:
            if b and b not in written and b not in feeds:
                feeds.append(b)
        read.update(op.input)
        written.update(b for b in op.output if b)
    outputs = [b for op in net.op for b in op.output if b and b not in read]
    return feeds, list(dict.fromkeys(outputs))
