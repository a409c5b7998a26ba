"""Save and Load: blobs to and from a file or DB, keyed by blob name, as Caffe2.

db_type "minidb" (Caffe2's own file format) and "lmdb" (a directory; pip install
"netbrew[db]") store each blob as Caffe2 does: serialized BlobProto records keyed
"<name>#%<chunk>" (netbrew.db.blobs), readable by Caffe2 and written by it. Without
db_type, netbrew's own Save and Load keep their TensorProtos file ("tensorprotos": one
message, binary .pb or text .pbtxt by suffix, written atomically); Caffe2 nets, whose
Save and Load default to "minidb", get db_type set by netbrew.converters.caffe2.
Relative paths are relative to the current directory; Caffe2's absolute_path argument
is accepted and changes nothing. keep_device is accepted: loaded blobs are host arrays,
placed by the op's device option. The executor hands these kernels the op's blob names
(schema flag wants_names).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.db.blobs import blob_names, load_from_db, save_to_db, strip
from netbrew.errors import ModelLoadError, SchemaError, suggest
from netbrew.netdef.serialize import load_blobs, save_blobs
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

DB_TYPES = ("tensorprotos", "minidb", "lmdb")
_DB_ATTRS = {"db_type": "tensorprotos", "absolute_path": 0, "strip_prefix": ""}

schema(
    "Save",
    inputs=["blobs*"],
    outputs=[],
    attrs={**_DB_ATTRS, "db": REQUIRED, "blob_name_overrides": None, "chunk_size": 0},
    onnx=False,
    wants_names=True,
    doc="writes the inputs to the file or DB `db`, keyed by blob_name_overrides or else by "
    "the input names with everything up to strip_prefix removed; no outputs; db_type "
    "'tensorprotos' (one TensorProtos file), 'minidb' or 'lmdb' (Caffe2's BlobProto "
    "records, chunk_size values each: 0 = 1000000, -1 = one chunk); defaults "
    "db_type='tensorprotos', strip_prefix='', absolute_path=0, chunk_size=0",
)
schema(
    "Load",
    inputs=[],
    outputs=["blobs*"],
    attrs={
        **_DB_ATTRS,
        "db": None,
        "dbs": None,
        "add_prefix": "",
        "load_all": 0,
        "keep_device": 0,
        "source_blob_names": None,
    },
    onnx=False,
    wants_names=True,
    doc="outputs[i] = the tensor of the file or DB `db` (or of the DBs `dbs`) keyed "
    "source_blob_names[i] (default: the output's name); keys are matched after removing "
    "everything up to strip_prefix and prepending add_prefix; load_all=1 loads every blob "
    "and they must be exactly the outputs; defaults db_type='tensorprotos', load_all=0",
)
no_gradient("Save", "writes a file; it has no outputs")
no_gradient("Load", "reads a file; it has no inputs")


def _check_db_type(op: str, db_type: str) -> None:
    if db_type not in DB_TYPES:
        raise SchemaError(
            f"{op}: db_type {db_type!r} is not supported; netbrew reads and writes "
            f"{', '.join(map(repr, DB_TYPES))}"
        )


def _names(op: str, given: Sequence[str] | None, names: Sequence[str] | None, n: int, slot: str):
    """The explicit names (an override argument) or else the op's blob names, checked."""
    if given is not None:
        given = [g.decode() if isinstance(g, bytes) else str(g) for g in given]
        if len(given) != n:
            raise SchemaError(f"{op}: {len(given)} names in its name argument for {n} {slot}")
        return given
    if names is None:
        raise SchemaError(
            f"{op}: no blob names to key the file by; the executor passes them to ops whose "
            "schema sets wants_names, or give the names as an argument"
        )
    return list(names)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@kernel("Save")
def save_cpu(
    *arrays: np.ndarray,
    db: str,
    db_type: str = "tensorprotos",
    absolute_path: int = 0,
    strip_prefix: str = "",
    blob_name_overrides: Sequence[str] | None = None,
    chunk_size: int = 0,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple:
    _check_db_type("Save", db_type)
    keys = _names("Save", blob_name_overrides, input_names, len(arrays), "inputs")
    if blob_name_overrides is None:
        keys = [strip(k, strip_prefix) for k in keys]
    seen: set[str] = set()
    for key in keys:
        if key in seen:
            raise SchemaError(f"Save: two inputs would be saved under the same name {key!r}")
        seen.add(key)
    for key, value in zip(keys, arrays):
        if not _is_tensor(value):
            held = value.flat[0] if isinstance(value, np.ndarray) and value.size else value
            raise SchemaError(
                f"Save: blob {key!r} holds a {type(held).__name__}, not a tensor; only "
                "tensors (numbers, bools, bytes or strings) can be saved"
            )
    if db_type == "tensorprotos":
        save_blobs(dict(zip(keys, arrays)), _text(db))
    else:
        save_to_db(dict(zip(keys, arrays)), _text(db), db_type, chunk_size=int(chunk_size))
    return ()


def _is_tensor(value: Any) -> bool:
    if not isinstance(value, np.ndarray):
        return False
    if value.dtype != object:
        return True
    return all(isinstance(v, (bytes, str)) for v in value.flat)


def _held(stored) -> str:
    names = sorted(stored)
    return ", ".join(names[:10]) + (", ..." if len(names) > 10 else "") or "none"


@kernel("Load")
def load_cpu(
    *,
    db: str | None = None,
    db_type: str = "tensorprotos",
    absolute_path: int = 0,
    strip_prefix: str = "",
    add_prefix: str = "",
    load_all: int = 0,
    source_blob_names: Sequence[str] | None = None,
    dbs: Sequence[str] | None = None,
    keep_device: int = 0,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple[np.ndarray, ...]:
    _check_db_type("Load", db_type)
    if dbs:
        paths = [_text(d) for d in dbs]
        if db:
            raise SchemaError("Load: give db or dbs, not both")
        if len(set(paths)) != len(paths):
            raise SchemaError(f"Load: dbs names a DB twice: {paths}")
    elif db:
        paths = [_text(db)]
    else:
        raise SchemaError("Load: required argument 'db' (or 'dbs') is missing")
    where = paths[0] if len(paths) == 1 else str(paths)
    if load_all and source_blob_names is not None:
        raise SchemaError("Load: load_all=1 and source_blob_names cannot be used together")
    n = len(output_names) if output_names is not None else len(source_blob_names or ())
    wanted = _names("Load", source_blob_names, output_names, n, "outputs")
    if len(set(wanted)) != len(wanted):
        raise SchemaError(f"Load: a source blob name occurs twice in {wanted}")
    if db_type == "tensorprotos":
        stored: dict[str, np.ndarray] = {}
        for path in paths:
            for k, v in load_blobs(path).items():
                name = add_prefix + strip(k, strip_prefix)
                if name in stored:
                    raise ModelLoadError(f"Load: blob {name!r} is in more than one of {where}")
                stored[name] = v
    else:
        stored = load_from_db(
            paths,
            db_type,
            wanted=None if load_all else set(wanted),
            strip_prefix=strip_prefix,
            add_prefix=add_prefix,
        )
    if load_all:
        extra = sorted(set(stored) - set(wanted))
        if extra:
            raise SchemaError(
                f"Load: load_all=1 loads every blob of {where}, and {len(extra)} of them are "
                f"not among the op's outputs: {', '.join(extra[:10])}"
                f"{', ...' if len(extra) > 10 else ''}; a kernel cannot create blobs the op "
                "does not name, so list them all as outputs"
            )
    out = []
    for name in wanted:
        if name not in stored:
            if db_type != "tensorprotos":  # name what the DBs hold
                stored = dict.fromkeys(blob_names(paths, db_type, strip_prefix, add_prefix))
            raise ModelLoadError(
                f"Load: blob {name!r} is not in {where!r}.{suggest(name, stored)} "
                f"The file holds {len(stored)} blobs: {_held(stored)}"
            )
        out.append(stored[name])
    return tuple(out)
