"""Caffe2's key-value databases: `create_db(db_type, path, mode)`, cursors and transactions.

    db = create_db("minidb", "train.minidb", "new")
    with db, db.new_transaction() as txn:
        txn.put("00000000", value_bytes)     # commit() runs when the block ends
    with create_db("minidb", "train.minidb", "read") as db:
        cursor = db.new_cursor()             # positioned on the first record
        while cursor.valid():
            key, value = cursor.key(), cursor.value()
            cursor.next()

Backends (db_type): "minidb" (Caffe2's own file format, byte for byte; netbrew.db.minidb)
and "lmdb" (a directory, through the `lmdb` package: pip install "netbrew[db]").
Modes: "read" (the DB must exist and is never written), "write" (append to an existing
DB or create one) and "new" (start empty). Keys are str (bytes are accepted and kept:
non-UTF-8 bytes round-trip through surrogate escapes); values are bytes.

A truncated or corrupt DB raises ModelLoadError naming its path, the key (or the index
of the record) and what is wrong.

`write_tensor_protos` and `read_tensor_protos` build and read example DBs the way
Caffe2's make_mnist_db does: one TensorProtos record per example, keyed "%08d".
`netbrew.db.blobs` stores blobs as Caffe2's Save and Load ops do (BlobProto records).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from netbrew.errors import ModelLoadError
from netbrew.proto.netbrew_pb2 import TensorProtos

MODES = ("read", "write", "new")


def encode_key(key: str | bytes) -> bytes:
    """The bytes stored for `key` (str keys as UTF-8, escapes restored)."""
    if isinstance(key, bytes):
        return key
    return str(key).encode("utf-8", "surrogateescape")


def decode_key(key: bytes) -> str:
    """The str form of stored key bytes; bytes that are not UTF-8 stay as escapes."""
    return bytes(key).decode("utf-8", "surrogateescape")


class Cursor:
    """Walks a DB's records in order. A new cursor is on the first record (if any)."""

    def seek_to_first(self) -> None:
        raise NotImplementedError

    def next(self) -> None:
        raise NotImplementedError

    def key(self) -> str:
        raise NotImplementedError

    def value(self) -> bytes:
        raise NotImplementedError

    def valid(self) -> bool:
        raise NotImplementedError

    def supports_seek(self) -> bool:
        return False

    def seek(self, key: str | bytes) -> None:
        """Moves to the first record whose key is >= `key` (backends that support it)."""
        raise NotImplementedError(f"{type(self).__name__} cannot seek; walk it with next()")

    def take(self, count: int, step: int = 1) -> list[tuple[str, bytes]]:
        """Up to `count` (key, value) pairs: the current record, then every `step`-th one
        after it, stopping early at the end of the DB. Afterwards the cursor is `step`
        records past the last one taken (not valid() if that is past the end). Backends
        override this with a bulk read; this is the record-by-record walk it must match."""
        records: list[tuple[str, bytes]] = []
        while len(records) < count and self.valid():
            records.append((self.key(), self.value()))
            for _ in range(step):
                self.next()
                if not self.valid():
                    break
        return records

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        """The (key, value) pairs from the current record on."""
        while self.valid():
            yield self.key(), self.value()
            self.next()


class Transaction:
    """Collects puts; commit() makes them durable. Leaving a `with` block commits."""

    def put(self, key: str | bytes, value: bytes) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()


class DB:
    """A key-value DB opened in one of MODES. Use it as a context manager, or close() it."""

    db_type = ""

    def __init__(self, path: str | os.PathLike, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"DB mode {mode!r}: expected one of {', '.join(map(repr, MODES))}")
        self.path = os.fspath(path)
        self.mode = mode
        self.closed = False

    def new_cursor(self) -> Cursor:
        raise NotImplementedError

    def new_transaction(self) -> Transaction:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self.db_type} {self.path}: the DB is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.mode == "read":
            raise ValueError(
                f"{self.db_type} {self.path}: opened for reading; open it with mode 'write' "
                "or 'new' to put records"
            )

    def __enter__(self) -> DB:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} mode={self.mode!r}>"


def _open_minidb(path: str, mode: str) -> DB:
    from netbrew.db.minidb import MiniDB

    return MiniDB(path, mode)


def _open_lmdb(path: str, mode: str) -> DB:
    from netbrew.db.lmdb_db import LMDB

    return LMDB(path, mode)


DB_TYPES: dict[str, Callable[[str, str], DB]] = {
    "minidb": _open_minidb,
    "MiniDB": _open_minidb,  # Caffe2 registers both spellings
    "lmdb": _open_lmdb,
}


def create_db(db_type: str, path: str | os.PathLike, mode: str) -> DB:
    """Opens the DB at `path` (Caffe2's db::CreateDB).

    Args:
        db_type: "minidb" or "lmdb".
        path: the DB's file (minidb) or directory (lmdb).
        mode: "read", "write" (append) or "new" (start empty).

    Raises:
        ValueError: an unknown db_type or mode.
        ModelLoadError: mode "read" and the DB is missing or unreadable.
        ImportError: db_type "lmdb" without the lmdb package.
    """
    if db_type not in DB_TYPES:
        known = ", ".join(repr(t) for t in DB_TYPES if t != "MiniDB")
        raise ValueError(f"db_type {db_type!r} is not supported; netbrew has {known}")
    if mode not in MODES:
        raise ValueError(f"DB mode {mode!r}: expected one of {', '.join(map(repr, MODES))}")
    return DB_TYPES[db_type](os.fspath(path), mode)


def _db(db: DB | str | os.PathLike, db_type: str, mode: str) -> tuple[DB, bool]:
    """(the DB, whether this call opened it and must close it)."""
    if isinstance(db, DB):
        return db, False
    return create_db(db_type, db, mode), True


def write_tensor_protos(
    db: DB | str | os.PathLike,
    *arrays: Any,
    db_type: str = "minidb",
    start: int = 0,
    key_format: str = "%08d",
) -> int:
    """Writes one TensorProtos record per example, as Caffe2's make_mnist_db does.

    Record i holds one TensorProto per array, `arrays[j][i]` (for instance an image and
    its label), and is keyed `key_format % (start + i)`.

    Args:
        db: a DB opened for writing, or a path (then created new as `db_type`).
        arrays: arrays with the same first dimension, the number of examples.
        db_type: the backend when `db` is a path.
        start: the number of the first record's key.
        key_format: the key's printf format; Caffe2 uses "%08d".

    Returns:
        The number of records written.
    """
    from netbrew.netdef.tensor import from_array

    if not arrays:
        raise ValueError("write_tensor_protos: give at least one array")
    columns = [np.asarray(a) for a in arrays]
    if any(c.ndim == 0 for c in columns):
        raise ValueError("write_tensor_protos: arrays need a first dimension (the examples)")
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        shapes = ", ".join(str(c.shape) for c in columns)
        raise ValueError(f"write_tensor_protos: arrays differ in their first dimension: {shapes}")
    (count,) = counts
    handle, owned = _db(db, db_type, "new")
    try:
        with handle.new_transaction() as txn:
            for i in range(count):
                record = TensorProtos(protos=[from_array(c[i]) for c in columns])
                txn.put(key_format % (start + i), record.SerializeToString())
    finally:
        if owned:
            handle.close()
    return count


def read_tensor_protos(
    db: DB | str | os.PathLike, *, db_type: str = "minidb"
) -> Iterator[tuple[str, list[np.ndarray]]]:
    """Yields (key, [array per TensorProto]) for each TensorProtos record of a DB.

    Raises:
        ModelLoadError: a record is not a TensorProtos, or a tensor in it is malformed.
    """
    from google.protobuf import message as pb_message

    from netbrew.netdef.tensor import to_array

    handle, owned = _db(db, db_type, "read")
    try:
        cursor = handle.new_cursor()
        for key, value in cursor:
            record = TensorProtos()
            try:
                record.ParseFromString(value)
                tensors = [to_array(p) for p in record.protos]
            except (pb_message.DecodeError, ModelLoadError) as e:
                raise ModelLoadError(
                    f"{handle.path}: record {key!r} is not a valid TensorProtos "
                    f"({len(value)} bytes): {e}"
                ) from e
            yield key, tensors
    finally:
        if owned:
            handle.close()


def read_all(db: DB) -> Sequence[tuple[str, bytes]]:
    """Every (key, value) record of a DB opened for reading, in order."""
    return list(db.new_cursor())


__all__ = [
    "DB",
    "DB_TYPES",
    "MODES",
    "Cursor",
    "Transaction",
    "create_db",
    "read_all",
    "read_tensor_protos",
    "write_tensor_protos",
]
