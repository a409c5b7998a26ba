"""brew.db_input: training batches read from a DB, as Caffe2's brew.db_input."""

from __future__ import annotations

from collections.abc import Sequence

from netbrew.brew.arg_scope import helper
from netbrew.brew.model_helper import ModelHelper
from netbrew.netdef.net import BlobReference


@helper
def db_input(
    model: ModelHelper,
    blobs_out: str | Sequence[str],
    batch_size: int,
    db: str,
    db_type: str = "minidb",
    *,
    num_shards: int = 1,
    shard_id: int = 0,
    shard_by_rank: bool = False,
    prefetch: int = 4,
) -> BlobReference | list[BlobReference]:
    """Batches of the TensorProtos records of the DB `db` (written, say, by
    netbrew.db.write_tensor_protos): `blobs_out[j]` is tensor j of batch_size records
    stacked along axis 0. The reader wraps around at the end of the DB and reads up to
    `prefetch` batches ahead on a background thread; num_shards/shard_id, or
    shard_by_rank=True (netbrew.distributed's rank and world size), read one shard.

    Emits: CreateDB (blob "dbreader_<db>") into param_init_net, TensorProtosDBInput
    into net.
    """
    outputs = [blobs_out] if isinstance(blobs_out, str) else [str(b) for b in blobs_out]
    if not outputs:
        raise ValueError("brew.db_input: give at least one output blob")
    shards = {"num_shards": num_shards, "shard_id": shard_id} if num_shards != 1 else {}
    if shard_by_rank:
        shards = {"shard_by_rank": 1}
    reader = model.param_init_net.CreateDB(
        [], f"dbreader_{db}", db=str(db), db_type=db_type, **shards
    )
    return model.net.TensorProtosDBInput(
        [reader], outputs if len(outputs) > 1 else outputs[0], batch_size=batch_size,
        prefetch=prefetch,
    )  # fmt: skip
