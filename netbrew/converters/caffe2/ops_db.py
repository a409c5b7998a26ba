"""Translators for Caffe2's Save and Load: the same ops, db_type defaulting to "minidb".

Caffe2 keeps blobs in a DB (minidb, lmdb, leveldb...); netbrew's own Save and Load
default to a TensorProtos file, so a Caffe2 op without db_type gets "minidb" spelled
out. Load from DBReader inputs and allow_incomplete have no netbrew equivalent.
"""

from __future__ import annotations

from netbrew.converters.caffe2.context import Context, translator
from netbrew.proto.netbrew_pb2 import OperatorDef

SAVE_ARGS = ("db", "db_type", "absolute_path", "strip_prefix", "blob_name_overrides",
             "chunk_size")  # fmt: skip
LOAD_ARGS = ("db", "dbs", "db_type", "absolute_path", "strip_prefix", "add_prefix",
             "load_all", "keep_device", "source_blob_names")  # fmt: skip


@translator("Save", "Load")
def save_load(op: OperatorDef, ctx: Context) -> list[OperatorDef]:
    if op.type == "Load" and op.input:
        raise ValueError("Load from DBReader inputs is not supported; give db or dbs")
    args = {}
    for name in SAVE_ARGS if op.type == "Save" else LOAD_ARGS:
        if ctx.has(name):
            args[name] = ctx.arg(name)
    args["db_type"] = args.get("db_type") or "minidb"
    if isinstance(args["db_type"], bytes):
        args["db_type"] = args["db_type"].decode()
    if args["db_type"] == "MiniDB":
        args["db_type"] = "minidb"
    return [ctx.make(op.type, op.input, op.output, **args)]
