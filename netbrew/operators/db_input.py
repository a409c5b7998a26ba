"""CreateDB and TensorProtosDBInput: training data read from a DB, as Caffe2's data input.

    CreateDB([], "reader", db="train.minidb", db_type="minidb")     # param_init_net, once
    TensorProtosDBInput("reader", ["data", "label"], batch_size=64)  # net, every step

CreateDB's output is a reader object (netbrew.db.reader.DBReader, held in a 0-d object
blob). TensorProtosDBInput reads batch_size TensorProtos records per run and outputs
tensor j of each record stacked along a new axis 0 ([batch_size, ...]); batch_size=0
outputs one record's tensors as they are (Caffe2's semantics). At the end of the data it
starts over (Caffe2's wrap-around), and batches are read ahead on a background thread
(`prefetch` batches; 0 reads on the op's thread). Sharding: num_shards/shard_id, or
shard_by_rank=1 for netbrew.distributed's world size and rank, splits the records into
disjoint interleaved shards that together cover the DB.
"""

from __future__ import annotations

import numpy as np

from netbrew.db.reader import DEFAULT_PREFETCH, DBReader
from netbrew.errors import SchemaError
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

schema(
    "CreateDB",
    inputs=[],
    outputs=["reader"],
    attrs={"db": REQUIRED, "db_type": "minidb", "num_shards": 1, "shard_id": 0, "shard_by_rank": 0},
    onnx=False,
    doc="reader = a DB reader over the records of the DB `db` (db_type 'minidb' or 'lmdb'), "
    "shard shard_id of num_shards (records shard_id, shard_id + num_shards, ...; "
    "shard_by_rank=1 uses netbrew.distributed's rank and world size); defaults "
    "db_type='minidb', num_shards=1, shard_id=0, shard_by_rank=0",
)
schema(
    "TensorProtosDBInput",
    inputs=["reader"],
    outputs=["data*"],
    attrs={"batch_size": 0, "prefetch": DEFAULT_PREFETCH},
    onnx=False,
    output_mask=True,  # its length tells the kernel how many tensors a record must hold
    doc="outputs[j] = tensor j of the next batch_size TensorProtos records of the reader, "
    "stacked along a new axis 0 ([batch_size, ...]; batch_size=0: one record's tensor), "
    "wrapping around at the end of the DB; up to `prefetch` batches are read ahead on a "
    "background thread (0: none); defaults batch_size=0, prefetch=4",
)
no_gradient("CreateDB", "makes a DB reader; it has no inputs")
no_gradient("TensorProtosDBInput", "reads training data from a DB")


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@kernel("CreateDB")
def create_db_cpu(
    *,
    db: str,
    db_type: str = "minidb",
    num_shards: int = 1,
    shard_id: int = 0,
    shard_by_rank: int = 0,
) -> tuple[np.ndarray]:
    if shard_by_rank:
        from netbrew.distributed import world

        w = world.world()
        num_shards, shard_id = w.size, w.rank
    reader = DBReader(_text(db), _text(db_type), int(num_shards), int(shard_id))
    blob = np.empty((), dtype=object)
    blob[()] = reader
    return (blob,)


def _reader(value: object) -> DBReader:
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 0:
        value = value[()]
    if not isinstance(value, DBReader):
        what = f"{value.dtype}{list(value.shape)}" if hasattr(value, "shape") else type(value)
        raise SchemaError(
            f"TensorProtosDBInput: input 'reader' is {what}, not a DB reader; make it with "
            "CreateDB (brew.db_input adds both ops)"
        )
    return value


@kernel("TensorProtosDBInput")
def tensor_protos_db_input_cpu(
    reader: object,
    *,
    batch_size: int = 0,
    prefetch: int = DEFAULT_PREFETCH,
    output_mask: tuple[bool, ...] = (True,),
) -> tuple[np.ndarray, ...]:
    if batch_size < 0:
        raise SchemaError(f"TensorProtosDBInput: batch_size is {batch_size}; it must be >= 0")
    return tuple(_reader(reader).next_batch(int(batch_size), len(output_mask), int(prefetch)))
