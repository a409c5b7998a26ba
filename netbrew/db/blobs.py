"""Blobs in a DB the way Caffe2's Save and Load ops keep them (load_save_op.h).

Each tensor is stored as serialized BlobProto records (name, type "Tensor", tensor),
cut into chunks of `chunk_size` elements: chunk i is keyed "<name>#%<i>" and its
TensorProto holds the full dims and, in `segment`, the flat range [begin, end) of the
values it carries. An empty tensor is one chunk with segment [0, 0). Reading accepts
every form Caffe2 wrote: keys with or without the "#%" chunk suffix, tensors with or
without a segment, chunks in any order (also across several DBs), and BlobProtos that
count their chunks in content_num_chunks / content_chunk_id. Blobs of type
"std::string" load as 0-d object arrays; other non-tensor blobs are refused.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf import message as pb_message

from netbrew.db import create_db
from netbrew.errors import ModelLoadError
from netbrew.netdef.tensor import from_array, to_array
from netbrew.proto.netbrew_pb2 import BlobProto, TensorProto

CHUNK_SEPARATOR = "#%"
DEFAULT_CHUNK_SIZE = 1_000_000  # Caffe2's --caffe2_tensor_chunk_size
NO_CHUNKING = -1  # Caffe2's kNoChunking; 0 (kDefaultChunkSize) means DEFAULT_CHUNK_SIZE


def strip(name: str, prefix: str) -> str:
    """`name` without everything up to and including the first `prefix` (Caffe2's rule)."""
    at = name.find(prefix) if prefix else -1
    return name if at < 0 else name[at + len(prefix) :]


def blob_name(db_key: str, strip_prefix: str = "", add_prefix: str = "") -> str:
    """The blob a DB key loads into (Caffe2's buildBlobNameFromDbKey)."""
    name = db_key.split(CHUNK_SEPARATOR, 1)[0]
    return add_prefix + strip(name, strip_prefix)


def blob_names(
    paths: Sequence[str | os.PathLike], db_type: str, strip_prefix: str = "", add_prefix: str = ""
) -> list[str]:
    """The blob names the keys of the DBs load into, in order, without duplicates."""
    names: dict[str, None] = {}
    for path in paths:
        with create_db(db_type, path, "read") as db:
            for key, _ in db.new_cursor():
                names[blob_name(key, strip_prefix, add_prefix)] = None
    return list(names)


def serialize_tensor(name: str, array: Any, chunk_size: int = 0) -> list[tuple[str, bytes]]:
    """The (key, BlobProto bytes) records Caffe2's TensorSerializer writes for a tensor."""
    arr = np.asarray(array)
    numel = int(arr.size)
    if chunk_size == NO_CHUNKING:
        chunk_size = numel + 1
    elif chunk_size == 0:
        chunk_size = DEFAULT_CHUNK_SIZE
    elif chunk_size < 0:
        raise ValueError(f"chunk_size {chunk_size}: use a positive size, 0 or -1")
    flat = arr.reshape(-1)
    records = []
    for begin in range(0, max(numel, 1), chunk_size):
        end = min(begin + chunk_size, numel)
        tensor = from_array(flat[begin:end], name)
        del tensor.dims[:]
        tensor.dims.extend(arr.shape)
        tensor.segment.begin, tensor.segment.end = begin, end
        tensor.device_detail.device_type = 0  # CPU, as Caffe2's StoreDeviceDetail writes
        proto = BlobProto(name=name, type="Tensor", tensor=tensor)
        records.append((f"{name}{CHUNK_SEPARATOR}{begin // chunk_size}", proto.SerializeToString()))
    return records


def save_to_db(
    blobs: Mapping[str, Any], path: str | os.PathLike, db_type: str, *, chunk_size: int = 0
) -> None:
    """Writes `blobs` (name -> array) as a new DB at `path`, replacing what was there
    (write_records: atomic for a minidb)."""
    records = (
        record
        for name, array in blobs.items()
        for record in serialize_tensor(name, array, chunk_size)
    )
    write_records(path, db_type, records)


def write_records(
    path: str | os.PathLike, db_type: str, records: Iterable[tuple[str, bytes]]
) -> None:
    """Writes `records` (key, value) in order as a new DB at `path`, replacing what was there.

    A minidb is written beside `path` and renamed into place, so a crash never leaves a
    half-written file; an lmdb DB is emptied and filled in one transaction.
    """
    path = os.fspath(path)
    target = path
    if db_type in ("minidb", "MiniDB"):
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fd, target = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
        os.close(fd)
    try:
        with create_db(db_type, target, "new") as db, db.new_transaction() as txn:
            for key, value in records:
                txn.put(key, value)
        if target != path:
            os.replace(target, path)
    finally:
        if target != path and os.path.exists(target):
            os.unlink(target)


@dataclass
class _Blob:
    """A blob being assembled from its chunks."""

    where: str  # the DB path of its first record
    array: np.ndarray | None = None
    flat: np.ndarray | None = None
    shape: tuple[int, ...] = ()
    data_type: int = 0
    covered: list[tuple[int, int]] = field(default_factory=list)
    num_chunks: int | None = None
    chunk_ids: set[int] = field(default_factory=set)
    whole: bool = False

    def missing(self) -> str:
        """'' when complete, else what is missing."""
        if self.num_chunks is not None:
            if len(self.chunk_ids) < self.num_chunks:
                return f"{len(self.chunk_ids)} of its {self.num_chunks} chunks are in the DB"
            return ""
        if self.flat is None:
            return ""
        have = sum(e - b for b, e in self.covered)
        if have != self.flat.size:
            return f"its chunks hold {have} of its {self.flat.size} values"
        return ""

    def result(self) -> np.ndarray:
        if self.array is not None:
            return self.array
        assert self.flat is not None
        return self.flat.reshape(self.shape)


def _decode_chunk(tensor: TensorProto, count: int) -> np.ndarray:
    part = TensorProto()
    part.CopyFrom(tensor)
    del part.dims[:]
    part.dims.append(count)
    part.ClearField("segment")
    return to_array(part)


def _add_record(blob: _Blob, proto: BlobProto, where: str, key: str) -> None:
    """Merges one record into `blob`; raises ModelLoadError for inconsistent chunks."""
    here = f"{where}: key {key!r}"
    if proto.HasField("content_num_chunks"):
        total, chunk = proto.content_num_chunks, proto.content_chunk_id
        if blob.num_chunks is None and (blob.whole or blob.flat is not None):
            raise ModelLoadError(f"{here}: a chunk counted by content_num_chunks for a blob "
                                 "already loaded without chunk counts")  # fmt: skip
        if blob.num_chunks not in (None, total):
            raise ModelLoadError(f"{here}: content_num_chunks {total}, earlier chunks said "
                                 f"{blob.num_chunks}")  # fmt: skip
        if not 0 <= chunk < total:
            raise ModelLoadError(f"{here}: content_chunk_id {chunk} is outside [0, {total})")
        if chunk in blob.chunk_ids:
            raise ModelLoadError(f"{here}: chunk {chunk} occurs twice")
        blob.num_chunks = total
        blob.chunk_ids.add(chunk)
    elif blob.num_chunks is not None:
        raise ModelLoadError(f"{here}: a record without content_num_chunks for a blob whose "
                             "other chunks have it")  # fmt: skip
    if not proto.HasField("tensor"):
        if proto.type == "std::string":
            if blob.array is not None or blob.flat is not None:
                raise ModelLoadError(f"{here}: the blob occurs twice")
            blob.array = np.array(proto.content, dtype=object)
            blob.whole = True
            return
        kind = proto.type or "no type"
        raise ModelLoadError(
            f"{here}: a BlobProto of type {kind!r} holds no tensor; netbrew loads only "
            "tensors (and std::string blobs)"
        )
    tensor = proto.tensor
    shape = tuple(int(d) for d in tensor.dims)
    if any(d < 0 for d in shape):
        raise ModelLoadError(f"{here}: negative dimension in dims {list(shape)}")
    numel = int(np.prod(shape, dtype=np.int64))
    if not tensor.HasField("segment"):
        if blob.whole or blob.flat is not None or blob.array is not None:
            raise ModelLoadError(f"{here}: the blob occurs twice (and has no segment)")
        blob.array = to_array(tensor)
        blob.whole = True
        return
    begin, end = tensor.segment.begin, tensor.segment.end
    if not 0 <= begin <= end <= numel:
        raise ModelLoadError(
            f"{here}: segment [{begin}, {end}) is outside the {numel} values of dims {list(shape)}"
        )
    if blob.whole:
        raise ModelLoadError(f"{here}: a chunk of a blob already loaded whole")
    values = _decode_chunk(tensor, end - begin)
    if blob.flat is None:
        blob.flat = np.empty(numel, dtype=values.dtype)
        blob.shape, blob.data_type = shape, tensor.data_type
    elif shape != blob.shape or tensor.data_type != blob.data_type:
        raise ModelLoadError(
            f"{here}: this chunk has dims {list(shape)} and data type {tensor.data_type}, "
            f"earlier chunks {list(blob.shape)} and {blob.data_type}"
        )
    for b, e in blob.covered:
        if begin < e and b < end:
            raise ModelLoadError(
                f"{here}: segment [{begin}, {end}) overlaps an earlier chunk's [{b}, {e})"
            )
    blob.flat[begin:end] = values
    blob.covered.append((begin, end))


def load_from_db(
    paths: Sequence[str | os.PathLike],
    db_type: str,
    *,
    wanted: Collection[str] | None = None,
    strip_prefix: str = "",
    add_prefix: str = "",
) -> dict[str, np.ndarray]:
    """Reads the blobs of one or more DBs written by Caffe2's (or netbrew's) Save.

    Args:
        paths: the DBs; a blob may not come from two of them.
        db_type: "minidb" or "lmdb".
        wanted: the blob names to load (after the prefixes); None loads every record.
        strip_prefix: removed, with everything before it, from each key.
        add_prefix: then prepended.

    Returns:
        Blob name -> array, for the wanted blobs found (all of them when wanted is None).

    Raises:
        ModelLoadError: a DB is missing or corrupt, a record is not a BlobProto, a blob
            occurs in two DBs, or its chunks are inconsistent or incomplete.
    """
    blobs: dict[str, _Blob] = {}
    for path in paths:
        where = os.fspath(path)
        with create_db(db_type, where, "read") as db:
            cursor = db.new_cursor()
            while cursor.valid():
                key = cursor.key()
                name = blob_name(key, strip_prefix, add_prefix)
                if wanted is None or name in wanted:
                    blob = blobs.get(name)
                    if blob is None:
                        blob = blobs[name] = _Blob(where)
                    elif blob.where != where:
                        raise ModelLoadError(
                            f"{where}: key {key!r}: blob {name!r} is also in {blob.where}; "
                            "a blob may come from one DB only"
                        )
                    proto = BlobProto()
                    value = cursor.value()
                    try:
                        proto.ParseFromString(value)
                    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
                        raise ModelLoadError(
                            f"{where}: key {key!r}: the value is not a valid BlobProto "
                            f"({len(value)} bytes): {e}"
                        ) from e
                    try:
                        _add_record(blob, proto, where, key)
                    except ModelLoadError as e:
                        if str(e).startswith(where):
                            raise
                        raise ModelLoadError(f"{where}: key {key!r}: {e}") from None
                    if (
                        wanted is not None
                        and len(blobs) == len(wanted)
                        and not any(b.missing() for b in blobs.values())
                    ):
                        break  # everything asked for is loaded, as Caffe2 stops
                cursor.next()
    for name, blob in blobs.items():
        problem = blob.missing()
        if problem:
            raise ModelLoadError(f"{blob.where}: blob {name!r} is incomplete: {problem}")
    return {name: blob.result() for name, blob in blobs.items()}
