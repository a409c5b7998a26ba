"""RecordLayout: batches decoded from the records' shared byte layout equal protobuf's
decoding record by record, and records that do not fit fall back with the same errors."""

import numpy as np
import pytest

from netbrew.db import create_db, read_tensor_protos, write_tensor_protos
from netbrew.db.reader import DBReader
from netbrew.db.records import RecordLayout
from netbrew.errors import ModelLoadError
from netbrew.netdef.tensor import from_array, to_array
from netbrew.proto.netbrew_pb2 import TensorProto, TensorProtos

RNG = np.random.default_rng(0)


def record(*tensors, raw=False):
    return TensorProtos(protos=[from_array(t, raw=raw) for t in tensors]).SerializeToString()


def protobuf_decode(values):
    """The oracle: each record parsed by protobuf, tensors stacked."""
    records = [[to_array(p) for p in TensorProtos.FromString(v).protos] for v in values]
    return [np.stack(c) for c in zip(*records)]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()
        assert g.flags.writeable and g.flags.c_contiguous


EXAMPLES = {  # name: (per-record tensors, raw_data)
    "float image and int32 label": (
        lambda: (RNG.normal(size=(1, 5, 3)).astype(np.float32), np.int32(RNG.integers(0, 10))),
        False,
    ),
    "odd shapes, float64": (lambda: (RNG.normal(size=(3, 1, 7)),), False),
    "int64 and bool": (lambda: (np.int64(RNG.integers(0, 128)), RNG.random(5) < 0.5), False),
    "uint8 and int16 small values": (
        lambda: (RNG.integers(0, 128, 6).astype(np.uint8), RNG.integers(0, 100, 2, np.int16)),
        False,
    ),
    "raw_data of every width": (
        lambda: (
            RNG.normal(size=(2, 3)).astype(np.float16),
            RNG.integers(-1000, 1000, 4).astype(np.int32),
            RNG.normal(size=3),
            RNG.integers(0, 255, 5).astype(np.uint8),
        ),
        True,
    ),
    "named scalar": (lambda: (np.float32(RNG.normal()),), False),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
@pytest.mark.parametrize("n", [1, 5])
def test_layout_decodes_like_protobuf(name, n):
    make, raw = EXAMPLES[name]
    values = [record(*make(), raw=raw) for _ in range(n)]
    layout = RecordLayout.of(values[0])
    assert layout is not None
    got, fits = layout.decode(values)
    assert fits.all()
    assert_same(got, protobuf_decode(values))


def test_byte_data_of_a_byte_tensor():
    def rec(data):
        proto = TensorProto(dims=[4], data_type=TensorProto.BYTE, byte_data=bytes(data))
        return TensorProtos(protos=[proto]).SerializeToString()

    values = [rec([1, 200, 3, 255]), rec([0, 0, 129, 7])]
    got, fits = RecordLayout.of(values[0]).decode(values)
    assert fits.all()
    assert_same(got, protobuf_decode(values))


@pytest.mark.parametrize(
    "tensors",
    [
        (np.array(["a", "bc"], dtype=object),),  # strings
        (np.int32(200),),  # a two-byte varint
        (np.int32(-1),),  # a ten-byte varint
        (np.zeros(3, np.float16),),  # float16 in int32_data
        (np.zeros((0, 3), np.float32),),  # no payload at all
    ],
    ids=["string", "varint 200", "varint -1", "float16", "empty"],
)
def test_records_without_a_layout(tensors):
    assert RecordLayout.of(record(*tensors)) is None


def test_not_a_tensor_protos_has_no_layout():
    assert RecordLayout.of(b"\xff\xff\xff not a TensorProtos") is None
    assert RecordLayout.of(b"") is None


def test_records_that_do_not_fit_are_flagged():
    values = [record(np.ones(3, np.float32), np.int32(label)) for label in (1, 2, 3, 4, 5)]
    values[1] = record(np.ones(3, np.float32), np.int32(300))  # longer varint: longer record
    values[2] = record(np.ones(4, np.float32), np.int32(3))  # other dims
    values[3] = values[3][:-1] + b"\x81"  # same length, varint byte >= 0x80
    layout = RecordLayout.of(values[0])
    _, fits = layout.decode(values)
    assert fits.tolist() == [True, False, False, False, True]


def reader_batch(tmp_path, db_type, *arrays, batch, name="db"):
    path = str(tmp_path / name)
    write_tensor_protos(path, *arrays, db_type=db_type)
    with DBReader(path, db_type) as reader:
        return reader.read_batch(batch, len(arrays))


@pytest.mark.parametrize("db_type", ["minidb", "lmdb"])
def test_reader_mixes_fitting_and_other_records(tmp_path, db_type):
    if db_type == "lmdb":
        pytest.importorskip("lmdb")
    images = RNG.normal(size=(9, 2, 3)).astype(np.float32)
    labels = np.array([3, 200, 5, -7, 1, 127, 128, 0, 9], np.int32)  # some long varints
    got = reader_batch(tmp_path, db_type, images, labels, batch=9)
    assert_same(got, [images, labels])


def test_reader_without_a_layout_decodes_record_by_record(tmp_path):
    labels = np.array([300, 2, 1000], np.int32)  # the first record has no layout
    got = reader_batch(tmp_path, "minidb", labels, batch=3)
    assert_same(got, [labels])


def test_reader_batches_equal_read_tensor_protos_across_wrap_around(tmp_path):
    path = str(tmp_path / "db.minidb")
    images = RNG.normal(size=(7, 1, 4, 4)).astype(np.float32)
    labels = RNG.integers(0, 10, 7).astype(np.int32)
    write_tensor_protos(path, images, labels)
    order = [t for _, t in read_tensor_protos(path)]
    with DBReader(path, "minidb") as reader:
        for start in range(0, 12, 4):
            got = reader.read_batch(4, 2)
            want = [np.stack([order[(start + i) % 7][j] for i in range(4)]) for j in range(2)]
            assert_same(got, want)


def test_a_corrupt_record_inside_a_fitting_batch_is_named(tmp_path):
    path = str(tmp_path / "bad.minidb")
    good = record(np.ones(3, np.float32), np.int32(1))
    bad = bytearray(good)
    bad[1] = 0x7F  # the TensorProto's length: same record size, no longer parses
    with create_db("minidb", path, "new") as db, db.new_transaction() as txn:
        txn.put("00000000", good)
        txn.put("00000001", good)
        txn.put("00000002", bytes(bad))
    with DBReader(path, "minidb") as reader:
        with pytest.raises(ModelLoadError, match=r"bad.minidb: record '00000002' is not a valid"):
            reader.read_batch(3, 2)


def test_a_record_of_other_dims_inside_a_fitting_batch_is_named(tmp_path):
    path = str(tmp_path / "ragged.minidb")
    with create_db("minidb", path, "new") as db, db.new_transaction() as txn:
        txn.put("00000000", record(np.ones(3, np.float32)))
        txn.put("00000001", record(np.ones(3, np.float32)))
        txn.put("00000002", record(np.ones((1, 3), np.float32)))
    with DBReader(path, "minidb") as reader:
        with pytest.raises(ModelLoadError, match=r"record '00000002': tensor 0 is float32\[1, 3\]"):
            reader.read_batch(3, 1)
