"""DB readers: Caffe2's DBReader (the blob CreateDB makes) with a prefetch thread.

    reader = DBReader("train.minidb", "minidb", num_shards=2, shard_id=1)
    image, label = reader.next_batch(64, 2)    # arrays [64, ...], read ahead in the background

A reader walks a DB of TensorProtos records (netbrew.db.write_tensor_protos) as Caffe2's
db::DBReader did: shard `shard_id` of `num_shards` reads records shard_id,
shard_id + num_shards, ..., and at the end of the DB it starts over from its first
record, so a reader never runs dry and every shard's batches keep coming (Caffe2's
wrap-around). The shards of one DB are disjoint and together cover it.

`next_batch` serves batches from a background thread that reads up to `prefetch`
batches ahead into a bounded queue, so a training step does not wait on the disk (Caffe2's
PrefetchOperator read one batch ahead). The thread is a daemon and stops at close();
it never keeps the interpreter from exiting. An error while reading (a corrupt record)
is raised by the next_batch call that would have returned that batch, naming the DB.

The thread shares the GIL with the training step, so reading must cost little Python:
the cursor takes a batch's records in bulk (Cursor.take), and records that share the
batch's first record's byte layout are decoded together (netbrew.db.records: one slice
of a byte matrix per tensor), others by protobuf one by one. For the demo's records,
batch 64, a batch went from 2.4 ms of GIL-held work to 0.07 ms (minidb; lmdb 0.06 ms),
and the step time from 2.3x that of feeding from memory to 1.05-1.08x (lmdb 1.04-1.06x)
on the shared 2-core dev box (benchmarks/DB_INPUT.md).
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

import numpy as np
from google.protobuf import message as pb_message

from netbrew.db import create_db
from netbrew.db.records import RecordLayout
from netbrew.errors import ModelLoadError
from netbrew.proto.netbrew_pb2 import TensorProtos

DEFAULT_PREFETCH = 4  # batches read ahead


class DBReader:
    """Reads the records of one shard of a DB in order, wrapping around at the end.

    Args:
        db: the DB's path.
        db_type: "minidb" or "lmdb".
        num_shards: how many readers share the DB.
        shard_id: which of them this is, 0 <= shard_id < num_shards.

    Raises:
        ValueError: bad shard arguments.
        ModelLoadError: the DB is missing, unreadable, empty, or has fewer records than
            shard_id + 1.
    """

    def __init__(
        self, db: str | os.PathLike, db_type: str = "minidb", num_shards: int = 1, shard_id: int = 0
    ) -> None:
        num_shards, shard_id = int(num_shards), int(shard_id)
        path = os.fspath(db)
        if num_shards < 1:
            raise ValueError(f"{db_type} {path}: num_shards is {num_shards}; it must be >= 1")
        if not 0 <= shard_id < num_shards:
            raise ValueError(
                f"{db_type} {path}: shard_id {shard_id} is outside [0, {num_shards}) "
                f"for num_shards={num_shards}"
            )
        self.path, self.db_type = path, db_type
        self.num_shards, self.shard_id = num_shards, shard_id
        self.db = create_db(db_type, path, "read")
        self.cursor = self.db.new_cursor()
        self.lock = threading.Lock()
        self.records_read = 0  # by this reader, counting repeats
        self.passes = 0  # how many times it wrapped around
        self._layout: RecordLayout | None = None  # of the last batch's first record
        self._prefetchers: dict[tuple[int, int], _Prefetcher] = {}
        self.closed = False
        try:
            self._move_to_beginning()
        except BaseException:
            self.db.close()
            raise

    def __repr__(self) -> str:
        shard = f" shard {self.shard_id}/{self.num_shards}" if self.num_shards > 1 else ""
        return f"<DBReader {self.db_type} {self.path!r}{shard}>"

    def _move_to_beginning(self) -> None:
        self.cursor.seek_to_first()
        if not self.cursor.valid():
            raise ModelLoadError(f"{self.path}: the {self.db_type} DB is empty; nothing to read")
        for s in range(self.shard_id):
            self.cursor.next()
            if not self.cursor.valid():
                raise ModelLoadError(
                    f"{self.path}: the {self.db_type} DB has {s + 1} record(s), fewer than "
                    f"shard {self.shard_id} of {self.num_shards} needs (at least "
                    f"{self.shard_id + 1})"
                )

    def read(self) -> tuple[str, bytes]:
        """The next (key, value) of this shard; after the last, the shard's first again."""
        return self.read_records(1)[0]

    def read_records(self, count: int) -> list[tuple[str, bytes]]:
        """The next `count` (key, value) records of this shard, wrapping around at its end
        (Caffe2: each read skips num_shards records), read in bulk by the cursor."""
        records: list[tuple[str, bytes]] = []
        with self.lock:
            if self.closed:
                raise ValueError(f"{self!r} is closed")
            while len(records) < count:
                records += self.cursor.take(count - len(records), self.num_shards)
                if not self.cursor.valid():
                    self._move_to_beginning()
                    self.passes += 1
            self.records_read += count
        return records

    def read_tensors(self) -> tuple[str, list[np.ndarray]]:
        """The next record's key and tensors (one array per TensorProto)."""
        key, value = self.read()
        return key, self._parse(key, value)

    def _parse(self, key: str, value: bytes) -> list[np.ndarray]:
        from netbrew.netdef.tensor import to_array

        record = TensorProtos()
        try:
            record.ParseFromString(value)
            return [to_array(p) for p in record.protos]
        except (pb_message.DecodeError, RuntimeError, ValueError, ModelLoadError) as e:
            raise ModelLoadError(
                f"{self.path}: record {key!r} is not a valid TensorProtos ({len(value)} bytes): {e}"
            ) from e

    def read_batch(self, batch_size: int, num_outputs: int) -> list[np.ndarray]:
        """`num_outputs` arrays: tensor j of the next batch_size records stacked along a new
        axis 0 (batch_size 0: tensor j of the next record itself, as Caffe2).

        Records that share the first one's byte layout are decoded together
        (netbrew.db.records: one slice of a byte matrix per tensor, no protobuf parse);
        the others one by one."""
        records = self.read_records(max(int(batch_size), 1))
        columns = self._decode(records, num_outputs)
        return [c[0] for c in columns] if batch_size <= 0 else columns

    def _decode(self, records: list[tuple[str, bytes]], num_outputs: int) -> list[np.ndarray]:
        values = [v for _, v in records]
        layout = self._layout
        if layout is not None:
            columns, fits = layout.decode(values)
        if layout is None or not fits[0]:  # the first record sets the batch's layout
            layout = self._layout = RecordLayout.of(values[0])
            if layout is None:
                return self._decode_each(records, num_outputs)
            columns, fits = layout.decode(values)
        self._check_count(records[0][0], layout.num_tensors, num_outputs)
        for i in np.flatnonzero(~fits):  # corrupt, or another layout: protobuf names it
            key, value = records[i]
            tensors = self._parse(key, value)
            self._check_count(key, len(tensors), num_outputs)
            for j, t in enumerate(tensors):
                self._check_stacks(key, j, t, columns[j][0])
                columns[j][i] = t
        return columns

    def _decode_each(self, records: list[tuple[str, bytes]], num_outputs: int) -> list[np.ndarray]:
        columns: list[list[np.ndarray]] = [[] for _ in range(num_outputs)]
        for key, value in records:
            tensors = self._parse(key, value)
            self._check_count(key, len(tensors), num_outputs)
            for j, t in enumerate(tensors):
                self._check_stacks(key, j, t, columns[j][0] if columns[j] else t)
                columns[j].append(t)
        return [np.stack(c) for c in columns]

    def _check_count(self, key: str, count: int, num_outputs: int) -> None:
        if count != num_outputs:
            raise ModelLoadError(
                f"{self.path}: record {key!r} holds {count} tensor(s) and the op "
                f"has {num_outputs} output(s); give one output per tensor of a record"
            )

    def _check_stacks(self, key: str, j: int, t: np.ndarray, first: np.ndarray) -> None:
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ModelLoadError(
                f"{self.path}: record {key!r}: tensor {j} is {t.dtype}{list(t.shape)}, "
                f"earlier records of the batch have {first.dtype}{list(first.shape)}; "
                "a batch stacks tensors of one shape"
            )

    def next_batch(
        self, batch_size: int, num_outputs: int, prefetch: int = DEFAULT_PREFETCH
    ) -> list[np.ndarray]:
        """The next batch (see read_batch), read ahead by a background thread that keeps up
        to `prefetch` batches ready; prefetch=0 reads it now, on this thread."""
        if prefetch <= 0:
            return self.read_batch(batch_size, num_outputs)
        spec = (int(batch_size), int(num_outputs))
        with self.lock:
            if self.closed:
                raise ValueError(f"{self!r} is closed")
            worker = self._prefetchers.get(spec)
            if worker is None:
                worker = self._prefetchers[spec] = _Prefetcher(self, *spec, int(prefetch))
        return worker.get()

    def close(self) -> None:
        """Stops the prefetch threads and closes the DB. Idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            workers = list(self._prefetchers.values())
        for worker in workers:
            worker.stop()
        with self.lock:
            self.db.close()

    def __enter__(self) -> DBReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Prefetcher:
    """A daemon thread filling a bounded queue with a reader's batches."""

    def __init__(self, reader: DBReader, batch_size: int, num_outputs: int, depth: int) -> None:
        self.reader = reader
        self.batch_size, self.num_outputs = batch_size, num_outputs
        self.queue: queue.Queue = queue.Queue(maxsize=max(depth, 1))
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(
            target=self._run, name=f"netbrew prefetch {reader.path}", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                item: Any = self.reader.read_batch(self.batch_size, self.num_outputs)
            except BaseException as e:  # handed to the consumer, which raises it
                item = _Failure(e)
            while not self.stopping.is_set():
                try:
                    self.queue.put(item, timeout=0.05)
                    break
                except queue.Full:
                    continue
            if isinstance(item, _Failure):
                return

    def get(self) -> list[np.ndarray]:
        if self.failure is not None:
            raise self.failure
        while True:
            try:
                item = self.queue.get(timeout=0.1)
            except queue.Empty:
                if not self.thread.is_alive() and self.queue.empty():
                    raise ModelLoadError(
                        f"{self.reader.path}: the prefetch thread has stopped (reader closed)"
                    ) from None
                continue
            if isinstance(item, _Failure):
                self.failure = item.error
                raise item.error
            return item

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5.0)


__all__ = ["DEFAULT_PREFETCH", "DBReader"]
