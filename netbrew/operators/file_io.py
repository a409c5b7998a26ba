"""Save and Load: blobs to and from a TensorProtos file, keyed by blob name, as Caffe2.

Caffe2 writes a key-value database (db_type "minidb", "leveldb", ...); netbrew writes
one TensorProtos message (db_type "tensorprotos", binary .pb or text .pbtxt by suffix,
written atomically). Relative paths are relative to the current directory; Caffe2's
absolute_path argument is accepted and changes nothing. The executor hands these
kernels the op's blob names (schema flag wants_names).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.errors import ModelLoadError, SchemaError, suggest
from netbrew.netdef.serialize import load_blobs, save_blobs
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

DB_TYPES = ("tensorprotos",)
_DB_ATTRS = {"db": REQUIRED, "db_type": "tensorprotos", "absolute_path": 0, "strip_prefix": ""}

schema(
    "Save",
    inputs=["blobs*"],
    outputs=[],
    attrs={**_DB_ATTRS, "blob_name_overrides": None},
    onnx=False,
    wants_names=True,
    doc="writes the inputs to the TensorProtos file `db`, keyed by blob_name_overrides or "
    "else by the input names with everything up to strip_prefix removed; no outputs; "
    "defaults db_type='tensorprotos', strip_prefix='', absolute_path=0",
)
schema(
    "Load",
    inputs=[],
    outputs=["blobs*"],
    attrs={
        **_DB_ATTRS,
        "add_prefix": "",
        "load_all": 0,
        "source_blob_names": None,
    },
    onnx=False,
    wants_names=True,
    doc="outputs[i] = the tensor of the TensorProtos file `db` keyed source_blob_names[i] "
    "(default: the output's name); file keys are matched after removing everything up to "
    "strip_prefix and prepending add_prefix; defaults db_type='tensorprotos', load_all=0",
)
no_gradient("Save", "writes a file; it has no outputs")
no_gradient("Load", "reads a file; it has no inputs")


def _check_db_type(op: str, db_type: str) -> None:
    if db_type not in DB_TYPES:
        raise SchemaError(
            f"{op}: db_type {db_type!r} is not supported; netbrew reads and writes only "
            f"{', '.join(map(repr, DB_TYPES))} (one TensorProtos .pb or .pbtxt file)"
        )


def strip(name: str, prefix: str) -> str:
    """`name` without everything up to and including the first `prefix` (Caffe2's rule)."""
    at = name.find(prefix) if prefix else -1
    return name if at < 0 else name[at + len(prefix) :]


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


@kernel("Save")
def save_cpu(
    *arrays: np.ndarray,
    db: str,
    db_type: str,
    absolute_path: int,
    strip_prefix: str,
    blob_name_overrides: Sequence[str] | None,
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
    save_blobs(dict(zip(keys, arrays)), db)
    return ()


@kernel("Load")
def load_cpu(
    *,
    db: str,
    db_type: str,
    absolute_path: int,
    strip_prefix: str,
    add_prefix: str,
    load_all: int,
    source_blob_names: Sequence[str] | None,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple[np.ndarray, ...]:
    _check_db_type("Load", db_type)
    if load_all:
        raise SchemaError(
            "Load: load_all=1 is not supported, list the outputs (a kernel cannot create "
            "blobs the op does not name)"
        )
    n = len(output_names) if output_names is not None else len(source_blob_names or ())
    wanted = _names("Load", source_blob_names, output_names, n, "outputs")
    stored = {add_prefix + strip(k, strip_prefix): v for k, v in load_blobs(db).items()}
    out = []
    for name in wanted:
        if name not in stored:
            held = ", ".join(sorted(stored)[:10]) + (", ..." if len(stored) > 10 else "")
            raise ModelLoadError(
                f"Load: blob {name!r} is not in {str(db)!r}.{suggest(name, stored)} "
                f"The file holds {len(stored)} blobs: {held or 'none'}"
            )
        out.append(stored[name])
    return tuple(out)
