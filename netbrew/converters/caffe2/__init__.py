"""Legacy Caffe2 models: load them into canonical ops, save them back.

    init_net, predict_net = netbrew.converters.caffe2.load("init_net.pb", "predict_net.pb")
    Predictor(init_net, predict_net).run({"data": x})

Caffe2's spellings (Conv's kernel/stride/pad/order, MaxPool's legacy_pad, Add's
broadcast/axis, Concat's split_info, SpatialBN, Softmax's flattening axis...) are
translated here, once; kernels and exporters never see them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from netbrew.converters.caffe2 import ops_misc, ops_window  # noqa: F401  (registers translators)
from netbrew.converters.caffe2.translate import CANONICAL_MARK, looks_legacy, translate_net
from netbrew.netdef.serialize import load_net, save_net
from netbrew.proto.netbrew_pb2 import NetDef


def _read(net: Any) -> NetDef:
    if isinstance(net, NetDef):
        return net
    if hasattr(net, "proto"):
        return net.proto()
    return load_net(net)  # .pb or .pbtxt by suffix; ModelLoadError names the path


def load(init_net: Any, predict_net: Any) -> tuple[NetDef, NetDef]:
    """Reads a Caffe2 model (paths to .pb/.pbtxt, or NetDefs) into canonical nets."""
    init = translate_net(
        _read(init_net),
        where=f"init net {init_net}" if not isinstance(init_net, NetDef) else "init net",
    )
    predict = translate_net(_read(predict_net), where="predict net")
    return init, predict


def save(init_net: Any, predict_net: Any, directory: str | os.PathLike) -> Path:
    """Writes init_net.pb and predict_net.pb (Caffe2's wire format, canonical ops, marked
    so that `load` reads them back unchanged). Atomic writes."""
    folder = Path(directory)
    for net, name in ((init_net, "init_net.pb"), (predict_net, "predict_net.pb")):
        proto = NetDef()
        proto.CopyFrom(_read(net))
        if not any(a.name == CANONICAL_MARK for a in proto.arg):
            proto.arg.add(name=CANONICAL_MARK, i=1)
        save_net(proto, folder / name)
    return folder


__all__ = ["load", "looks_legacy", "save", "translate_net"]
