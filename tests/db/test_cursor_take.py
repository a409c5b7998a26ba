"""Cursor.take: the bulk reads of minidb and lmdb match the record-by-record walk, in the
records returned and where the cursor is left, for every shard step and at the end."""

import importlib.util

import pytest

from netbrew.db import Cursor, create_db

DB_TYPES = ["minidb", pytest.param("lmdb", marks=pytest.mark.skipif(
    importlib.util.find_spec("lmdb") is None, reason="needs lmdb"))]  # fmt: skip

SAME_SIZE = [(f"{i:08d}", bytes([i]) * 5) for i in range(11)]
# sizes change midway (a longer value, then a longer key): the bulk read stops and resumes
MIXED = (
    SAME_SIZE[:4]
    + [("00000004", b"longer value")]
    + [(f"{i:08d}", bytes([i]) * 5) for i in range(5, 8)]
    + [("00000008-long-key", b"xxxxx")]
    + [(f"{i:08d}", bytes([i]) * 5) for i in range(9, 13)]
)


def write(tmp_path, db_type, records):
    path = tmp_path / ("db.minidb" if db_type == "minidb" else "db_lmdb")
    with create_db(db_type, path, "new") as db, db.new_transaction() as txn:
        for key, value in records:
            txn.put(key, value)
    return path


def state(cursor):
    return (cursor.key(), cursor.value()) if cursor.valid() else None


@pytest.mark.parametrize("db_type", DB_TYPES)
@pytest.mark.parametrize("records", [SAME_SIZE, MIXED], ids=["same size", "mixed sizes"])
@pytest.mark.parametrize("step", [1, 2, 3])
def test_take_matches_the_record_by_record_walk(tmp_path, db_type, records, step):
    path = write(tmp_path, db_type, records)
    with create_db(db_type, path, "read") as db:
        for skip in range(3):  # start at a few records in
            for count in (1, 2, 3, 5, 20):
                bulk, walk = db.new_cursor(), db.new_cursor()
                for _ in range(skip):
                    bulk.next()
                    walk.next()
                while walk.valid():
                    want = Cursor.take(walk, count, step)
                    assert bulk.take(count, step) == want
                    assert state(bulk) == state(walk)
                assert bulk.take(count, step) == [] and not bulk.valid()
