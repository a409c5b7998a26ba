"""caffe2.python.predictor.predictor_exporter on netbrew: a deployable predictor in one DB.

    meta = PredictorExportMeta(model.net, model.params, inputs=["data"], outputs=["prob"])
    save_to_db("minidb", "model.minidb", meta)
    ...
    predict_net = prepare_prediction_net("model.minidb", "minidb")  # loads the parameters
    workspace.FeedBlob("data", x)
    workspace.RunNet(predict_net)
    prob = workspace.FetchBlob("prob")

The DB has the layout Caffe2's exporter wrote and its Predictor read: the record
"!!META_NET_DEF" (a BlobProto of type "std::string" holding a serialized MetaNetDef)
first, then the parameters as Caffe2's Save op stores them (BlobProto tensor records
keyed "<name>#%<chunk>"), in a "minidb" file or an "lmdb" directory. The MetaNetDef
names the nets GLOBAL_INIT_NET_TYPE (Load of the parameters from the DB reader blob
"!!PREDICTOR_DBREADER"), PREDICT_INIT_NET_TYPE (ConstantFill zeros for the inputs and
outputs) and PREDICT_NET_TYPE, and the blob lists PARAMETERS_BLOB_TYPE,
INPUTS_BLOB_TYPE and OUTPUTS_BLOB_TYPE (each key suffixed "_<name>" for a named
predictor). The nets keep the ops the model was built with (netbrew's brew writes
netbrew's canonical ops, as mobile_exporter's nets do); the two init nets are written
in Caffe2's spellings.

netbrew has no DBReader blob: prepare_prediction_net runs the global init net with its
Load ops reading the DB file directly (see `runnable_global_init_net`). use_ideep is
accepted and changes nothing (netbrew's kernels run on the CPU).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
from google.protobuf import message as pb_message

from netbrew.caffe2.python import core, workspace
from netbrew.caffe2.python.predictor_constants import predictor_constants as pc
from netbrew.converters.caffe2.op_by_op import translate_op
from netbrew.converters.caffe2.translate import CANONICAL_MARK, is_canonical
from netbrew.db import create_db
from netbrew.db.blobs import write_records
from netbrew.errors import ModelLoadError
from netbrew.netdef.args import set_args
from netbrew.netdef.scope import current_device
from netbrew.proto.netbrew_pb2 import (
    BlobProto,
    DeviceOption,
    MetaNetDef,
    NetDef,
    OperatorDef,
    PlanDef,
)

__all__ = [
    "PredictorExportMeta",
    "get_meta_net_def",
    "load_from_db",
    "prepare_prediction_net",
    "runnable_global_init_net",
    "save_to_db",
    "set_model_info",
]

_FIELDS = (
    "predict_net parameters inputs outputs shapes name extra_init_net net_type num_workers "
    "trainer_prefix"
)


def _proto(net: Any) -> Any:
    """The NetDef (or PlanDef) of a core.Net, netbrew Net or proto."""
    if isinstance(net, (NetDef, PlanDef)):
        return net
    if hasattr(net, "proto"):
        return net.proto()
    if hasattr(net, "Proto"):
        return net.Proto()
    raise TypeError(f"expected a Net, NetDef or PlanDef, got {type(net).__name__}")


class PredictorExportMeta(collections.namedtuple("PredictorExportMeta", _FIELDS)):
    """What save_to_db writes: the predict net, the names of its parameters, inputs and
    outputs, and optionally the inputs' and outputs' shapes (else read from the workspace),
    a name (suffixing the MetaNetDef keys), a net appended to the predict init net, the
    predict net's type and num_workers, and a trainer prefix for the plan names.

    parameters, inputs and outputs may be blob names or BlobReferences; inputs must be
    unique and neither inputs nor outputs may be parameters.
    """

    def __new__(
        cls,
        predict_net: Any,
        parameters: Iterable[Any],
        inputs: Iterable[Any],
        outputs: Iterable[Any],
        shapes: dict[str, Any] | None = None,
        name: str = "",
        extra_init_net: Any = None,
        net_type: str | None = None,
        num_workers: int | None = None,
        trainer_prefix: str | None = None,
    ) -> PredictorExportMeta:
        inputs = [str(i) for i in inputs]
        outputs = [str(o) for o in outputs]
        parameters = [str(p) for p in parameters]
        if len(set(inputs)) != len(inputs):
            raise ValueError(f"All inputs to the predictor should be unique: {inputs}")
        for what, names in (("inputs", inputs), ("outputs", outputs)):
            both = sorted(set(parameters) & set(names))
            if both:
                raise ValueError(
                    f"Parameters and {what} are required to be disjoint. Intersection: {both}"
                )
        return super().__new__(
            cls,
            _proto(predict_net),
            parameters,
            inputs,
            outputs,
            dict(shapes or {}),
            name,
            extra_init_net,
            net_type,
            num_workers,
            trainer_prefix,
        )

    def inputs_name(self) -> str:
        return _comp_name(pc.INPUTS_BLOB_TYPE, self.name)

    def outputs_name(self) -> str:
        return _comp_name(pc.OUTPUTS_BLOB_TYPE, self.name)

    def parameters_name(self) -> str:
        return _comp_name(pc.PARAMETERS_BLOB_TYPE, self.name)

    def global_init_name(self) -> str:
        return _comp_name(pc.GLOBAL_INIT_NET_TYPE, self.name)

    def predict_init_name(self) -> str:
        return _comp_name(pc.PREDICT_INIT_NET_TYPE, self.name)

    def predict_net_name(self) -> str:
        return _comp_name(pc.PREDICT_NET_TYPE, self.name)

    def train_init_plan_name(self) -> str:
        plan = _comp_name(pc.TRAIN_INIT_PLAN_TYPE, self.name)
        return f"{self.trainer_prefix}_{plan}" if self.trainer_prefix else plan

    def train_plan_name(self) -> str:
        plan = _comp_name(pc.TRAIN_PLAN_TYPE, self.name)
        return f"{self.trainer_prefix}_{plan}" if self.trainer_prefix else plan


def _comp_name(kind: str, name: str) -> str:
    return f"{kind}_{name}" if name else kind


def _get(entries: Any, key: str) -> Any:
    """The value of the map entry `key` of a repeated key/value field, or None."""
    for entry in entries:
        if entry.key == key:
            return entry.value
    return None


def _add_model_id_arg(meta: PredictorExportMeta, net: NetDef) -> None:
    """Copies the predict net's integer "model_id" argument (if any) onto `net`."""
    model_id = next((a for a in meta.predict_net.arg if a.name == "model_id"), None)
    if model_id is None:
        return
    old = next((a for a in net.arg if a.name == "model_id"), None)
    if old is not None:
        old.i = model_id.i
    else:
        net.arg.add(name="model_id", i=model_id.i)


def _predict_net(meta: PredictorExportMeta) -> NetDef:
    """The predict net: the ops, with the inputs then the parameters as external inputs
    and the outputs as external outputs."""
    source = meta.predict_net
    net = NetDef(name=source.name or "predict")
    net.op.extend(source.op)
    net.partition_info.extend(source.partition_info)
    net.external_input.extend(meta.inputs + meta.parameters)
    net.external_output.extend(meta.outputs)
    net.arg.extend(source.arg)  # keeps netbrew's canonical mark with the ops
    if meta.net_type is not None:
        net.type = meta.net_type
    if meta.num_workers is not None:
        net.num_workers = meta.num_workers
    return net


def _predict_init_net(ws: Any, meta: PredictorExportMeta) -> NetDef:
    """Zeros of the right shape for every input and output (Caffe2 had no shape inference),
    then the extra init net."""
    net = NetDef(name="predict-init")
    blobs = meta.inputs + meta.outputs
    for blob in blobs:
        shape = meta.shapes.get(blob)
        if shape is None:
            if not ws.has_blob(blob):
                raise ValueError(
                    f"{blob} not in workspace but needed for shape: give its shape in "
                    f"PredictorExportMeta(shapes=...) or feed it; the workspace holds "
                    f"{sorted(ws.blobs())}"
                )
            shape = np.shape(ws.fetch_blob(blob))
        # no device option: a net-level option (or load_from_db's) places it
        op = OperatorDef(type="ConstantFill", output=[blob])
        set_args(op, {"shape": [int(d) for d in shape], "value": 0.0})
        net.op.append(op)
    net.external_input.extend(blobs)
    if meta.extra_init_net is not None:
        extra = _proto(meta.extra_init_net)
        if is_canonical(extra):  # netbrew ops: the fills join them, translated
            ops = [t for op in net.op for t in translate_op(op)]
            del net.op[:]
            net.op.extend(ops)
            net.arg.add(name=CANONICAL_MARK, i=1)
        net.op.extend(extra.op)
        net.external_input.extend(b for b in extra.external_input if b not in net.external_input)
        net.external_output.extend(extra.external_output)
    _add_model_id_arg(meta, net)
    return net


def _global_init_net(meta: PredictorExportMeta) -> NetDef:
    """Load of the parameters from the DB reader blob the predictor provides."""
    net = NetDef(name="global-init")
    load = OperatorDef(type="Load", input=[pc.PREDICTOR_DBREADER], output=meta.parameters)
    net.op.append(load)
    net.external_input.append(pc.PREDICTOR_DBREADER)
    net.external_output.extend(meta.parameters)
    _add_model_id_arg(meta, net)
    return net


def get_meta_net_def(
    predictor_export_meta: PredictorExportMeta, ws: Any = None, db_type: str | None = None
) -> MetaNetDef:
    """The MetaNetDef save_to_db writes; shapes missing from the meta are read from `ws`
    (a netbrew Workspace; default: the current one of caffe2.python.workspace)."""
    meta = predictor_export_meta
    ws = ws if ws is not None else workspace.C()
    meta_net_def = MetaNetDef()
    meta_net_def.nets.add(key=meta.predict_init_name(), value=_predict_init_net(ws, meta))
    meta_net_def.nets.add(key=meta.global_init_name(), value=_global_init_net(meta))
    meta_net_def.nets.add(key=meta.predict_net_name(), value=_predict_net(meta))
    for key, names in (
        (meta.parameters_name(), meta.parameters),
        (meta.inputs_name(), meta.inputs),
        (meta.outputs_name(), meta.outputs),
    ):
        meta_net_def.blobs.add(key=key, value=names)
    return meta_net_def


def set_model_info(
    meta_net_def: MetaNetDef, project_str: str, model_class_str: str, version: str
) -> None:
    if not isinstance(meta_net_def, MetaNetDef):
        raise TypeError(f"expected a MetaNetDef, got {type(meta_net_def).__name__}")
    meta_net_def.modelInfo.project = project_str
    meta_net_def.modelInfo.modelClass = model_class_str
    meta_net_def.modelInfo.version = version


def _write_with_meta_first(path: str, db_type: str, meta_record: bytes) -> None:
    """Rewrites the DB at `path` with the "!!META_NET_DEF" record before its records, as
    Caffe2's Save wrote it (its input list began with the MetaNetDef blob)."""
    with create_db(db_type, path, "read") as db:
        records = [(k, v) for k, v in db.new_cursor() if k != pc.META_NET_DEF]
    write_records(path, db_type, [(pc.META_NET_DEF, meta_record), *records])


def save_to_db(
    db_type: str,
    db_destination: str | os.PathLike,
    predictor_export_meta: PredictorExportMeta,
    use_ideep: bool = False,
    *args: Any,
    **kwargs: Any,
) -> None:
    """Writes the predictor to a new DB at `db_destination` ("minidb" or "lmdb"): the
    MetaNetDef record, then the parameters, read from the current workspace by the Save
    op (extra keyword arguments go to it, e.g. chunk_size)."""
    del use_ideep, args  # netbrew runs on the CPU; Caffe2 ignored extra positionals too
    path = os.fspath(db_destination)
    meta_net_def = get_meta_net_def(predictor_export_meta, db_type=db_type)
    data = meta_net_def.SerializeToString()
    workspace.FeedBlob(pc.META_NET_DEF, np.array(data, dtype=object))
    save = core.CreateOperator(
        "Save",
        predictor_export_meta.parameters,
        [],
        absolute_path=True,
        db=path,
        db_type=db_type,
        **kwargs,
    )
    workspace.RunOperatorOnce(save)
    record = BlobProto(name=pc.META_NET_DEF, type="std::string", content=data)
    _write_with_meta_first(path, db_type, record.SerializeToString())


def _meta_bytes(blob: Any, where: str) -> bytes:
    value = blob.item() if isinstance(blob, np.ndarray) and blob.size == 1 else blob
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, (bytes, bytearray)):
        raise ModelLoadError(
            f"{where}: {pc.META_NET_DEF!r} is not a serialized MetaNetDef string "
            f"(it loads as {type(value).__name__})"
        )
    return bytes(value)


def load_from_db(
    filename: str | os.PathLike,
    db_type: str,
    device_option: DeviceOption | None = None,
    *args: Any,
    **kwargs: Any,
) -> MetaNetDef:
    """The MetaNetDef of the predictor DB `filename`, also left in the workspace as the
    blob "!!META_NET_DEF". With a device option (or inside a DeviceScope), every op of
    its nets gets that option.

    Raises:
        ModelLoadError: the DB is missing, unreadable, has no "!!META_NET_DEF" record (it
            was not written by save_to_db) or that record is not a MetaNetDef.
    """
    path = os.fspath(filename)
    where = f"predictor DB {path!r} ({db_type})"
    try:
        with create_db(db_type, path, "read") as db:
            has_meta = any(k == pc.META_NET_DEF for k, _ in db.new_cursor())
    except ModelLoadError as e:
        raise ModelLoadError(f"cannot load the {where}: {e}") from e
    if not has_meta:
        raise ModelLoadError(
            f"{where} has no {pc.META_NET_DEF!r} record: it is not a predictor DB "
            "(predictor_exporter.save_to_db writes one)"
        )
    load = core.CreateOperator("Load", [], [pc.META_NET_DEF], db=path, db_type=db_type)
    workspace.RunOperatorOnce(load)
    data = _meta_bytes(workspace.FetchBlob(pc.META_NET_DEF), where)
    meta_net_def = MetaNetDef()
    try:
        meta_net_def.ParseFromString(data)
    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
        raise ModelLoadError(
            f"{where}: {pc.META_NET_DEF!r} is not a valid MetaNetDef ({len(data)} bytes): {e}"
        ) from e
    if device_option is None:
        device_option = current_device()
    if device_option is not None:
        for entry in meta_net_def.nets:
            for op in entry.value.op:
                op.device_option.CopyFrom(device_option)
    return meta_net_def


def _net(meta_net_def: MetaNetDef, key: str, where: str) -> NetDef:
    net = _get(meta_net_def.nets, key)
    if net is None:
        have = [n.key for n in meta_net_def.nets]
        raise ModelLoadError(f"{where}: the MetaNetDef has no net {key!r} (it has {have})")
    return net


def runnable_global_init_net(
    global_init_net: NetDef, filename: str | os.PathLike, db_type: str
) -> NetDef:
    """`global_init_net` with each Load from the DB reader blob "!!PREDICTOR_DBREADER"
    reading the DB `filename` instead (netbrew's Load reads files, not reader blobs)."""
    net = NetDef()
    net.CopyFrom(global_init_net)
    for op in net.op:
        if op.type == "Load" and list(op.input) == [pc.PREDICTOR_DBREADER]:
            del op.input[:]
            kept = [a for a in op.arg if a.name not in ("db", "dbs", "db_type")]
            del op.arg[:]
            op.arg.extend(kept)
            op.arg.add(name="db", s=os.fspath(filename).encode())
            op.arg.add(name="db_type", s=db_type.encode())
    net.external_input[:] = [b for b in net.external_input if b != pc.PREDICTOR_DBREADER]
    return net


def prepare_prediction_net(
    filename: str | os.PathLike, db_type: str, device_option: DeviceOption | None = None
) -> core.Net:
    """Loads the predictor DB `filename` into the current workspace and returns its
    predict net, created there and ready to run (as Caffe2's did): runs the global init
    net (loading the parameters) and the predict init net (zeroing the inputs and
    outputs), then returns core.Net(predict net), whose Proto() is the NetDef."""
    where = f"predictor DB {os.fspath(filename)!r}"
    meta_net_def = load_from_db(filename, db_type, device_option)
    global_init = _net(meta_net_def, pc.GLOBAL_INIT_NET_TYPE, where)
    workspace.RunNetOnce(runnable_global_init_net(global_init, filename, db_type))
    workspace.RunNetOnce(_net(meta_net_def, pc.PREDICT_INIT_NET_TYPE, where))
    predict_net = core.Net(_net(meta_net_def, pc.PREDICT_NET_TYPE, where))
    workspace.CreateNet(predict_net)
    return predict_net
