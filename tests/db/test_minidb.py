"""MiniDB: Caffe2's record layout byte for byte, modes, corrupt files, TensorProtos DBs."""

import struct

import numpy as np
import pytest

from netbrew.db import create_db, read_all, read_tensor_protos, write_tensor_protos
from netbrew.errors import ModelLoadError
from netbrew.proto.netbrew_pb2 import TensorProtos

RECORDS = [("a", b"1"), ("key two", b"\x00\xffvalue"), ("ключ", b"x" * 1000)]


def caffe2_bytes(records):
    """The file Caffe2's MiniDBTransaction::Put writes: fwrite(int), fwrite(int), key, value."""
    out = b""
    for key, value in records:
        k = key.encode() if isinstance(key, str) else key
        out += struct.pack("<i", len(k)) + struct.pack("<i", len(value)) + k + value
    return out


def write(path, records, mode="new"):
    with create_db("minidb", path, mode) as db, db.new_transaction() as txn:
        for key, value in records:
            txn.put(key, value)


def test_written_file_is_caffe2_layout_and_reads_back_key_for_key(tmp_path):
    path = tmp_path / "x.minidb"
    write(path, RECORDS)
    assert path.read_bytes() == caffe2_bytes(RECORDS)
    with create_db("minidb", path, "read") as db:
        assert read_all(db) == RECORDS
        cursor = db.new_cursor()
        assert cursor.valid() and cursor.key() == "a" and cursor.value() == b"1"
        assert not cursor.supports_seek()
        cursor.next()
        cursor.next()
        cursor.next()
        assert not cursor.valid()
        cursor.seek_to_first()
        assert cursor.key() == "a"


def test_reads_a_file_built_to_caffe2s_layout(tmp_path):
    path = tmp_path / "c2.minidb"
    path.write_bytes(caffe2_bytes([("w#%0", b"abc"), (b"\xfe\xff", b"z")]))
    with create_db("minidb", str(path), "read") as db:
        records = read_all(db)
    assert records[0] == ("w#%0", b"abc")
    key, value = records[1]
    assert value == b"z"
    # non-UTF-8 keys round-trip
    write(tmp_path / "again.minidb", [(key, value)])
    assert (tmp_path / "again.minidb").read_bytes() == caffe2_bytes([(b"\xfe\xff", b"z")])


def test_modes_new_truncates_write_appends(tmp_path):
    path = tmp_path / "m.minidb"
    write(path, RECORDS)
    write(path, [("b", b"2")], mode="write")
    with create_db("minidb", path, "read") as db:
        assert [k for k, _ in read_all(db)] == ["a", "key two", "ключ", "b"]
    write(path, [("c", b"3")], mode="new")
    assert path.read_bytes() == caffe2_bytes([("c", b"3")])
    write(tmp_path / "fresh.minidb", [("d", b"4")], mode="write")  # write creates
    assert (tmp_path / "fresh.minidb").read_bytes() == caffe2_bytes([("d", b"4")])


def test_read_mode_never_writes(tmp_path):
    path = tmp_path / "r.minidb"
    write(path, RECORDS)
    before, mtime = path.read_bytes(), path.stat().st_mtime_ns
    with create_db("minidb", path, "read") as db:
        read_all(db)
        with pytest.raises(ValueError, match="opened for reading"):
            db.new_transaction()
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.minidb"]


def test_misuse(tmp_path):
    with pytest.raises(ValueError, match="db_type 'leveldb' is not supported"):
        create_db("leveldb", tmp_path / "x", "read")
    with pytest.raises(ValueError, match="DB mode 'append'"):
        create_db("minidb", tmp_path / "x", "append")
    with create_db("minidb", tmp_path / "w.minidb", "new") as db:
        with pytest.raises(ValueError, match="cursors need mode 'read'"):
            db.new_cursor()
        with pytest.raises(ValueError, match="empty keys and values"):
            db.new_transaction().put("k", b"")
    with pytest.raises(ModelLoadError, match=r"nothere\.minidb: no such minidb file"):
        create_db("minidb", tmp_path / "nothere.minidb", "read")
    assert not (tmp_path / "nothere.minidb").exists()


def read_error(path):
    with pytest.raises(ModelLoadError) as info, create_db("minidb", path, "read") as db:
        read_all(db)
    return str(info.value)


@pytest.mark.parametrize("cut", [2, 8 + 2, 8 + 5 + 1, 8 + 5 + 100])
def test_truncated_file_names_path_record_and_key(tmp_path, cut):
    """A record cut inside its header, its key or its value."""
    good = caffe2_bytes([("first", b"v1")])
    second = caffe2_bytes([("wkey0", b"v" * 101)])
    path = tmp_path / "t.minidb"
    path.write_bytes(good + second[:cut])
    message = read_error(path)
    assert str(path) in message and "record #1" in message and "truncated" in message
    if cut > 8 + 5:
        assert "'wkey0'" in message and "value needs 101 bytes" in message


def test_corrupt_lengths(tmp_path):
    path = tmp_path / "c.minidb"
    path.write_bytes(struct.pack("<ii", -4, 10) + b"x" * 20)
    message = read_error(path)
    assert str(path) in message and "record #0" in message and "key length -4" in message
    path.write_bytes(struct.pack("<ii", 3, 1 << 30) + b"abc")
    message = read_error(path)
    assert "'abc'" in message and "value needs 1073741824 bytes" in message


def test_tensor_protos_db_like_make_mnist_db(tmp_path):
    images = np.arange(3 * 4 * 4, dtype=np.uint8).reshape(3, 4, 4)
    labels = np.array([7, 1, 4], np.int32)
    path = tmp_path / "mnist.minidb"
    assert write_tensor_protos(str(path), images, labels) == 3
    with create_db("minidb", path, "read") as db:
        records = read_all(db)
    assert [k for k, _ in records] == ["00000000", "00000001", "00000002"]
    first = TensorProtos.FromString(records[0][1])
    assert [list(p.dims) for p in first.protos] == [[4, 4], []]
    got = list(read_tensor_protos(path))
    for i, (key, (image, label)) in enumerate(got):
        assert key == f"{i:08d}"
        np.testing.assert_array_equal(image, images[i])
        assert label.dtype == np.int32 and label.shape == () and label == labels[i]
    # into an open DB, appending with a later start
    with create_db("minidb", path, "write") as db:
        write_tensor_protos(db, images[:1], labels[:1], start=3)
    assert [k for k, _ in read_tensor_protos(path)][-1] == "00000003"
    with pytest.raises(ValueError, match="differ in their first dimension"):
        write_tensor_protos(str(tmp_path / "bad.minidb"), images, labels[:2])


def test_tensor_protos_record_that_is_not_one(tmp_path):
    path = tmp_path / "bad.minidb"
    write(path, [("00000000", b"\xff\xff\xff")])
    with pytest.raises(ModelLoadError, match=r"bad\.minidb: record '00000000' is not a valid"):
        list(read_tensor_protos(path))
