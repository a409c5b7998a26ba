"""Translators for Caffe2's Save and Load: the same ops, db_type defaulting to "minidb".

Caffe2 keeps blobs in a DB (minidb, lmdb, leveldb...); netbrew's own Save and Load
default to a TensorProtos file, so a Caffe2 op without db_type gets "minidb" spelled
out. Load from DBReader inputs and allow_incomplete have no netbrew equivalent. Load with
load_all=1 and no outputs names the blobs the DB holds when the op is translated.
"""

from __future__ import annotations

import os

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
    outputs = list(op.output)
    if op.type == "Load" and args.get("load_all") and not outputs:
        outputs = _stored_names(args)
    return [ctx.make(op.type, op.input, outputs, **args)]


def _stored_names(args: dict) -> list[str]:
    """Load(load_all=1) with no outputs, Caffe2's restore-everything idiom: a netbrew op
    names its outputs, so they are the blobs the DBs hold now, read at translation."""
    from netbrew.db.blobs import blob_names, strip
    from netbrew.netdef.serialize import load_blobs

    paths = [args["db"]] if args.get("db") else list(args.get("dbs") or [])
    paths = [p.decode() if isinstance(p, bytes) else str(p) for p in paths]
    strip_prefix, add_prefix = args.get("strip_prefix", ""), args.get("add_prefix", "")
    missing = [p for p in paths if not os.path.exists(p)]
    if not paths or missing:
        raise ValueError(
            f"load_all=1 with no outputs loads the blobs {missing or 'the db'} holds, which "
            "must exist when the op is created, to name them; list the blobs as outputs"
        )
    if args["db_type"] == "tensorprotos":
        names = [add_prefix + strip(k, strip_prefix) for p in paths for k in load_blobs(p)]
        return list(dict.fromkeys(names))
    return blob_names(paths, args["db_type"], strip_prefix, add_prefix)
