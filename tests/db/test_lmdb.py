"""The lmdb backend: records, seek, modes, read-only opening, TensorProtos DBs."""

import os

import numpy as np
import pytest

lmdb = pytest.importorskip("lmdb")

from netbrew.db import create_db, read_all, read_tensor_protos, write_tensor_protos  # noqa: E402
from netbrew.errors import ModelLoadError  # noqa: E402

RECORDS = [("00000000", b"zero"), ("00000001", b"one"), ("00000005", b"five")]


def write(path, records, mode="new"):
    with create_db("lmdb", path, mode) as db, db.new_transaction() as txn:
        for key, value in records:
            txn.put(key, value)


def snapshot(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_round_trip_and_seek(tmp_path):
    path = tmp_path / "db"
    write(path, RECORDS)
    assert (path / "data.mdb").exists()
    with create_db("lmdb", path, "read") as db:
        assert read_all(db) == RECORDS
        cursor = db.new_cursor()
        assert cursor.supports_seek()
        cursor.seek("00000002")
        assert cursor.key() == "00000005" and cursor.value() == b"five"
        cursor.next()
        assert not cursor.valid()
        cursor.seek_to_first()
        assert cursor.key() == "00000000"
    # the file is a plain LMDB environment: the lmdb package reads it directly
    with lmdb.open(str(path), readonly=True, lock=False) as env, env.begin() as txn:
        assert txn.get(b"00000001") == b"one"


def test_modes(tmp_path):
    path = tmp_path / "db"
    write(path, RECORDS)
    write(path, [("00000009", b"nine")], mode="write")
    with create_db("lmdb", path, "read") as db:
        assert len(read_all(db)) == 4
    write(path, [("a", b"1")], mode="new")
    with create_db("lmdb", path, "read") as db:
        assert read_all(db) == [("a", b"1")]


def test_read_mode_never_writes(tmp_path):
    path = tmp_path / "db"
    write(path, RECORDS)
    (path / "lock.mdb").unlink()
    before = snapshot(path)
    with create_db("lmdb", path, "read") as db:
        read_all(db)
        with pytest.raises(ValueError, match="opened for reading"):
            db.new_transaction()
    assert snapshot(path) == before


def test_errors(tmp_path):
    with pytest.raises(ModelLoadError, match=r"missing: no such lmdb directory"):
        create_db("lmdb", tmp_path / "missing", "read")
    assert not (tmp_path / "missing").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match=r"empty: no data\.mdb"):
        create_db("lmdb", tmp_path / "empty", "read")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(os.urandom(64))
    with pytest.raises(ModelLoadError, match=r"junk: cannot open this lmdb DB"):
        create_db("lmdb", tmp_path / "junk", "read")


def test_missing_package_names_the_extra(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_lmdb(name, *args, **kwargs):
        if name == "lmdb":
            raise ImportError("No module named 'lmdb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_lmdb)
    with pytest.raises(ImportError, match=r'pip install "netbrew\[db\]"'):
        create_db("lmdb", tmp_path / "db", "new")


def test_tensor_protos(tmp_path):
    images = np.random.default_rng(0).random((5, 2, 3), dtype=np.float32)
    labels = np.arange(5, dtype=np.int64)
    path = tmp_path / "train_lmdb"
    write_tensor_protos(path, images, labels, db_type="lmdb")
    got = list(read_tensor_protos(path, db_type="lmdb"))
    assert [k for k, _ in got] == [f"{i:08d}" for i in range(5)]
    for i, (_, (image, label)) in enumerate(got):
        np.testing.assert_array_equal(image, images[i])
        assert label == labels[i]


def test_dbs_opened_for_reading_share_the_environment(tmp_path):
    """The lmdb package opens a directory once per process; two read handles share it and
    the last close() closes it."""
    path = tmp_path / "db"
    write(path, RECORDS)
    first, second = create_db("lmdb", path, "read"), create_db("lmdb", path, "read")
    assert first.env is second.env
    first.close()
    assert read_all(second) == RECORDS  # still open for the other handle
    second.close()
    with lmdb.open(str(path), readonly=True, lock=False) as env, env.begin() as txn:
        assert txn.get(b"00000001") == b"one"  # closed: the package may open it again
