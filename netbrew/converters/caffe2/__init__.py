"""Legacy Caffe2 models: load them into canonical ops, save them back.

    init_net, predict_net = netbrew.converters.caffe2.load("init_net.pb", "predict_net.pb")
    Predictor(init_net, predict_net).run({"data": x})

Caffe2's spellings (Conv's kernel/stride/pad/order, MaxPool's legacy_pad, Add's
broadcast/axis, Concat's split_info, SpatialBN, Softmax's flattening axis...) are
translated here, once; kernels and exporters never see them. So are the arguments
brew's ModelHelper writes on every op (order, use_cudnn...), which are dropped, the ATen
ops of PyTorch's Caffe2 exports (ops_aten), and the CUDA placements of a model written
on a GPU machine: those ops run on CPU, with one DeviceFallbackWarning (devices).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from netbrew.converters.caffe2 import (  # noqa: F401  (registers translators)
    ops_aten,
    ops_db,
    ops_misc,
    ops_tensor,
    ops_window,
)
from netbrew.converters.caffe2.devices import gpu_fallback, place_on_cpu
from netbrew.converters.caffe2.translate import CANONICAL_MARK, looks_legacy, translate_net
from netbrew.netdef.serialize import load_net, save_net
from netbrew.proto.netbrew_pb2 import NetDef


def _read(net: Any) -> NetDef:
    if isinstance(net, NetDef):
        return net
    if hasattr(net, "proto"):
        return net.proto()
    return load_net(net)  # .pb or .pbtxt by suffix; ModelLoadError names the path


def load(init_net: Any, predict_net: Any, *, strict: bool = False) -> tuple[NetDef, NetDef]:
    """Reads a Caffe2 model (paths to .pb/.pbtxt, or NetDefs) into canonical nets.

    Ops a GPU machine wrote with a CUDA (or HIP) device option are placed on CPU, where
    netbrew's kernels run, and one DeviceFallbackWarning says how many there were.

    Args:
        init_net: the init net: a path to a .pb/.pbtxt file, a NetDef or a Net.
        predict_net: the predict net, likewise.
        strict: refuse a model whose ops ask for a GPU instead of running them on CPU.

    Raises:
        UnsupportedConversion: some op cannot be translated (all are listed), or strict
            and some op asks for a GPU (counted by type).
        ModelLoadError: a file is missing or not a NetDef.
    """
    init_where = f"init net {init_net}" if not isinstance(init_net, NetDef) else "init net"
    legacy_init, legacy_predict = _read(init_net), _read(predict_net)
    fallback = gpu_fallback(
        [("init net", legacy_init), ("predict net", legacy_predict)], strict=strict
    )
    init = translate_net(legacy_init, where=init_where)
    predict = translate_net(legacy_predict, where="predict net")
    if fallback is not None:
        # translate_net hands canonical nets back as they are: never rewrite the caller's.
        init, predict = (_copy(net) for net in (init, predict))
        place_on_cpu(fallback, [init, predict])
    return init, predict


def _copy(net: NetDef) -> NetDef:
    out = NetDef()
    out.CopyFrom(net)
    return out


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
