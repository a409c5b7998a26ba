"""Save and Load: round trips through TensorProtos files, minidb and lmdb DBs under tmp_path."""

import importlib.util
import struct

import numpy as np
import pytest

from netbrew.db import create_db
from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.serialize import load_blobs, save_blobs
from netbrew.netdef.tensor import from_array
from netbrew.operators import GRADIENTS, NoGradient, get_kernel
from netbrew.proto.netbrew_pb2 import BlobProto
from netbrew.testing import rand

BLOBS = {
    "fc_w": rand(3, 4),
    "fc_b": rand(3, dtype=np.float64),
    "it": np.array([7], np.int64),
    "mask": np.array([True, False]),
}


def workspace(blobs=BLOBS):
    ws = Workspace()
    for name, value in blobs.items():
        ws.feed_blob(name, value)
    return ws


def assert_same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_round_trip(tmp_path, suffix):
    path = str(tmp_path / f"params{suffix}")
    workspace().run_operator_once(op_def("Save", list(BLOBS), [], db=path))
    assert sorted(load_blobs(path)) == sorted(BLOBS)
    ws = Workspace()
    ws.run_operator_once(op_def("Load", [], list(BLOBS), db=path))
    for name, value in BLOBS.items():
        assert_same(ws.fetch_blob(name), value)


def test_relative_path_is_relative_to_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    workspace().run_operator_once(op_def("Save", ["fc_w"], [], db="sub/w.pb", absolute_path=0))
    assert (tmp_path / "sub" / "w.pb").exists()


def test_save_strip_prefix_and_overrides(tmp_path):
    path = tmp_path / "p.pb"
    ws = workspace({"gpu_0/fc_w": BLOBS["fc_w"], "gpu_0/fc_b": BLOBS["fc_b"]})
    ws.run_operator_once(
        op_def("Save", ["gpu_0/fc_w", "gpu_0/fc_b"], [], db=str(path), strip_prefix="gpu_0/")
    )
    assert sorted(load_blobs(path)) == ["fc_b", "fc_w"]
    ws.run_operator_once(
        op_def("Save", ["gpu_0/fc_w"], [], db=str(path), blob_name_overrides=["weights"])
    )
    assert list(load_blobs(path)) == ["weights"]


def test_load_source_names_and_prefixes(tmp_path):
    path = tmp_path / "p.pb"
    save_blobs({"gpu_0/fc_w": BLOBS["fc_w"], "gpu_0/fc_b": BLOBS["fc_b"]}, path)
    ws = Workspace()
    ws.run_operator_once(op_def("Load", [], ["w"], db=str(path), source_blob_names=["gpu_0/fc_w"]))
    assert_same(ws.fetch_blob("w"), BLOBS["fc_w"])
    ws.run_operator_once(
        op_def("Load", [], ["gpu_1/fc_b"], db=str(path), strip_prefix="gpu_0/", add_prefix="gpu_1/")
    )
    assert_same(ws.fetch_blob("gpu_1/fc_b"), BLOBS["fc_b"])


def test_kernels_take_explicit_names_without_the_executor(tmp_path):
    path = tmp_path / "p.pb"
    save = get_kernel("Save")
    save(
        BLOBS["fc_w"],
        db=str(path),
        db_type="tensorprotos",
        absolute_path=0,
        strip_prefix="",
        blob_name_overrides=["w"],
    )
    load = get_kernel("Load")
    (w,) = load(
        db=str(path),
        db_type="tensorprotos",
        absolute_path=0,
        strip_prefix="",
        add_prefix="",
        load_all=0,
        source_blob_names=["w"],
    )
    assert_same(w, BLOBS["fc_w"])
    with pytest.raises(SchemaError, match="no blob names to key the file by"):
        save(
            BLOBS["fc_w"],
            db=str(path),
            db_type="tensorprotos",
            absolute_path=0,
            strip_prefix="",
            blob_name_overrides=None,
        )


def test_errors(tmp_path):
    path = str(tmp_path / "p.pb")
    ws = workspace()
    with pytest.raises(OperatorError, match="db_type 'leveldb' is not supported"):
        ws.run_operator_once(op_def("Save", ["fc_w"], [], db=path, db_type="leveldb"))
    with pytest.raises(OperatorError, match="2 names in its name argument for 1 inputs"):
        ws.run_operator_once(op_def("Save", ["fc_w"], [], db=path, blob_name_overrides=["a", "b"]))
    with pytest.raises(OperatorError, match="same name 'w'"):
        ws.run_operator_once(
            op_def("Save", ["fc_w", "fc_b"], [], db=path, blob_name_overrides=["w", "w"])
        )
    with pytest.raises(SchemaError, match="required argument 'db' is missing"):
        ws.run_operator_once(op_def("Save", ["fc_w"], []))
    ws.run_operator_once(op_def("Save", ["fc_w", "fc_b"], [], db=path))
    with pytest.raises(OperatorError, match=r"blob 'fc_ww' is not in .*p\.pb.*Did you mean: fc_w"):
        ws.run_operator_once(op_def("Load", [], ["fc_ww"], db=path))
    with pytest.raises(OperatorError, match="not among the op's outputs: fc_b; a kernel cannot"):
        ws.run_operator_once(op_def("Load", [], ["fc_w"], db=path, load_all=1))
    ws.run_operator_once(op_def("Load", [], ["fc_b", "fc_w"], db=path, load_all=1))
    with pytest.raises(SchemaError, match=r"required argument 'db' \(or 'dbs'\) is missing"):
        get_kernel("Load")(output_names=["fc_w"])
    with pytest.raises(OperatorError, match="missing.pb"):
        ws.run_operator_once(op_def("Load", [], ["fc_w"], db=str(tmp_path / "missing.pb")))


@pytest.mark.parametrize("op_type", ["Save", "Load"])
def test_no_gradient(op_type):
    assert isinstance(GRADIENTS[op_type], NoGradient)


# --- Caffe2's DBs: minidb and lmdb, BlobProto records ---

DB_TYPES = ["minidb", pytest.param("lmdb", marks=pytest.mark.skipif(
    importlib.util.find_spec("lmdb") is None, reason="needs lmdb"))]  # fmt: skip


def db_path(tmp_path, db_type, name="params"):
    return str(tmp_path / (f"{name}.minidb" if db_type == "minidb" else f"{name}_lmdb"))


def db_records(path, db_type):
    with create_db(db_type, path, "read") as db:
        return [(k, BlobProto.FromString(v)) for k, v in db.new_cursor()]


def minidb_bytes(records):
    """Caffe2's MiniDB layout, built by hand: int key_len, int value_len, key, value."""
    out = b""
    for key, value in records:
        out += struct.pack("<ii", len(key), len(value)) + key.encode() + value
    return out


def chunk(name, array, begin, end, **blob_fields):
    """A BlobProto as Caffe2's TensorSerializer writes it: full dims, a segment of values."""
    tensor = from_array(array.reshape(-1)[begin:end], name)
    del tensor.dims[:]
    tensor.dims.extend(array.shape)
    tensor.segment.begin, tensor.segment.end = begin, end
    tensor.device_detail.device_type = 1  # written on a GPU: Load puts it on CPU
    return BlobProto(name=name, type="Tensor", tensor=tensor, **blob_fields).SerializeToString()


def test_load_a_minidb_built_to_caffe2s_layout_with_chunks(tmp_path):
    w = rand(4, 5)
    steps = np.arange(7, dtype=np.int64)
    path = tmp_path / "init.minidb"
    whole = BlobProto(name="bias", type="Tensor", tensor=from_array(BLOBS["fc_b"], "bias"))
    path.write_bytes(
        minidb_bytes(
            [
                ("w#%1", chunk("w", w, 8, 16)),  # chunks in any order
                ("bias", whole.SerializeToString()),  # no chunk suffix, no segment
                ("w#%0", chunk("w", w, 0, 8)),
                ("steps#%0", chunk("steps", steps, 0, 7)),
                ("w#%2", chunk("w", w, 16, 20)),
                ("gpu_0/skipped#%0", b"not even a BlobProto: never parsed"),
                ("e#%0", chunk("e", np.zeros((0, 3), np.float32), 0, 0)),
                ("c#%0", chunk("c", steps, 0, 4, content_num_chunks=2, content_chunk_id=0)),
                ("c#%1", chunk("c", steps, 4, 7, content_num_chunks=2, content_chunk_id=1)),
            ]
        )
    )
    before = path.read_bytes()
    ws = Workspace()
    ws.run_operator_once(
        op_def("Load", [], ["w", "bias", "steps", "e", "c"], db=str(path), db_type="minidb")
    )
    assert_same(ws.fetch_blob("w"), w)
    assert_same(ws.fetch_blob("bias"), BLOBS["fc_b"])
    assert_same(ws.fetch_blob("steps"), steps)
    assert_same(ws.fetch_blob("e"), np.zeros((0, 3), np.float32))
    assert_same(ws.fetch_blob("c"), steps)
    assert path.read_bytes() == before  # read mode never writes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["init.minidb"]


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_save_writes_caffe2s_records(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    ws = workspace()
    ws.run_operator_once(op_def("Save", list(BLOBS), [], db=path, db_type=db_type))
    records = db_records(path, db_type)
    assert sorted(k for k, _ in records) == sorted(f"{n}#%0" for n in BLOBS)
    for key, proto in records:
        name = key.split("#%")[0]
        assert proto.name == name and proto.type == "Tensor" and proto.tensor.name == name
        assert list(proto.tensor.dims) == list(BLOBS[name].shape)
        assert (proto.tensor.segment.begin, proto.tensor.segment.end) == (0, BLOBS[name].size)
    if db_type == "minidb":  # the layout Caffe2's MiniDB reads
        data = open(path, "rb").read()
        key_len, value_len = struct.unpack_from("<ii", data)
        assert data[8 : 8 + key_len].decode() == records[0][0]
        assert BlobProto.FromString(data[8 + key_len : 8 + key_len + value_len]) == records[0][1]


@pytest.mark.parametrize("db_type", DB_TYPES)
def test_db_round_trips(tmp_path, db_type):
    path = db_path(tmp_path, db_type)
    ws = workspace({"gpu_0/fc_w": BLOBS["fc_w"], "gpu_0/fc_b": BLOBS["fc_b"], "it": BLOBS["it"]})
    ws.run_operator_once(
        op_def(
            "Save",
            ["gpu_0/fc_w", "gpu_0/fc_b", "it"],
            [],
            db=path,
            db_type=db_type,
            strip_prefix="gpu_0/",
            chunk_size=5,
        )  # fmt: skip
    )
    keys = [k for k, _ in db_records(path, db_type)]
    assert sorted(keys) == ["fc_b#%0", "fc_w#%0", "fc_w#%1", "fc_w#%2", "it#%0"]
    ws = Workspace()
    ws.run_operator_once(
        op_def(
            "Load", [], ["gpu_1/fc_w", "gpu_1/it"], db=path, db_type=db_type, add_prefix="gpu_1/"
        )  # fmt: skip
    )
    assert_same(ws.fetch_blob("gpu_1/fc_w"), BLOBS["fc_w"])
    assert_same(ws.fetch_blob("gpu_1/it"), BLOBS["it"])
    ws.run_operator_once(
        op_def(
            "Load", [], ["fc_b", "fc_w", "it"], db=path, db_type=db_type, load_all=1, keep_device=1
        )  # fmt: skip
    )
    assert_same(ws.fetch_blob("fc_w"), BLOBS["fc_w"])
    ws.run_operator_once(
        op_def("Load", [], ["bias"], db=path, db_type=db_type, source_blob_names=["fc_b"])
    )
    assert_same(ws.fetch_blob("bias"), BLOBS["fc_b"])

    # blob_name_overrides on Save, two DBs on Load, strip_prefix on Load
    other = db_path(tmp_path, db_type, "other")
    ws = workspace()
    ws.run_operator_once(
        op_def(
            "Save",
            ["mask", "fc_w"],
            [],
            db=other,
            db_type=db_type,
            blob_name_overrides=["net/mask", "net/weights"],
            chunk_size=-1,
        )  # fmt: skip
    )
    ws = Workspace()
    ws.run_operator_once(
        op_def(
            "Load",
            [],
            ["mask", "weights", "it"],
            dbs=[other, path],
            db_type=db_type,
            strip_prefix="net/",
        )  # fmt: skip
    )
    assert_same(ws.fetch_blob("mask"), BLOBS["mask"])
    assert_same(ws.fetch_blob("weights"), BLOBS["fc_w"])
    assert_same(ws.fetch_blob("it"), BLOBS["it"])
    with pytest.raises(
        OperatorError,
        match=r"'fc_ww' is not in .*Did you mean: fc_w, fc_b\? The file holds 3 blobs",
    ):
        ws.run_operator_once(op_def("Load", [], ["fc_ww"], db=path, db_type=db_type))
    copy = db_path(tmp_path, db_type, "copy")
    with create_db(db_type, other, "read") as src, create_db(db_type, copy, "new") as dst:
        with dst.new_transaction() as txn:
            for key, value in src.new_cursor():
                txn.put(key, value)
    with pytest.raises(OperatorError, match="is also in .*a blob may come from one DB only"):
        ws.run_operator_once(
            op_def(
                "Load", [], ["weights"], dbs=[other, copy], db_type=db_type, strip_prefix="net/"
            )  # fmt: skip
        )


def test_corrupt_and_incomplete_dbs_name_the_path_and_key(tmp_path):
    path = tmp_path / "bad.minidb"
    w = rand(10)
    cases = [
        ([("w#%0", b"\xff\xff\xff\xff")], r"key 'w#%0': the value is not a valid BlobProto"),
        ([("w#%0", chunk("w", w, 0, 6))], r"blob 'w' is incomplete: its chunks hold 6 of its 10"),
        (
            [("w#%0", chunk("w", w, 0, 6)), ("w#%1", chunk("w", w, 4, 10))],
            r"key 'w#%1': segment \[4, 10\) overlaps an earlier chunk's \[0, 6\)",
        ),
        ([("w#%0", chunk("w", w, 8, 12))], r"key 'w#%0': segment \[8, 12\) is outside"),
        (
            [("w", BlobProto(name="w", type="DBReader", content=b"x").SerializeToString())],
            r"key 'w': a BlobProto of type 'DBReader' holds no tensor",
        ),
        (
            [("w#%0", chunk("w", w, 0, 5, content_num_chunks=3, content_chunk_id=0))],
            r"blob 'w' is incomplete: 1 of its 3 chunks",
        ),
    ]
    for records, problem in cases:
        path.write_bytes(minidb_bytes(records))
        with pytest.raises(OperatorError, match=rf"bad\.minidb: {problem}"):
            Workspace().run_operator_once(op_def("Load", [], ["w"], db=str(path), db_type="minidb"))
    # a file cut inside its last record
    path.write_bytes(minidb_bytes([("w#%0", chunk("w", w, 0, 10))])[:-3])
    with pytest.raises(OperatorError, match=r"bad\.minidb: record #0 .*key 'w#%0': truncated"):
        Workspace().run_operator_once(op_def("Load", [], ["w"], db=str(path), db_type="minidb"))
    with pytest.raises(OperatorError, match=r"nothere\.minidb: no such minidb file"):
        Workspace().run_operator_once(
            op_def("Load", [], ["w"], db=str(tmp_path / "nothere.minidb"), db_type="minidb")
        )


def test_save_replaces_a_minidb_whole(tmp_path):
    path = str(tmp_path / "p.minidb")
    ws = workspace()
    ws.run_operator_once(op_def("Save", list(BLOBS), [], db=path, db_type="minidb"))
    ws.run_operator_once(op_def("Save", ["it"], [], db=path, db_type="minidb"))
    assert [k for k, _ in db_records(path, "minidb")] == ["it#%0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.minidb"]  # no temp files left


def test_caffe2_save_and_load_default_to_minidb(tmp_path):
    from netbrew.converters.caffe2 import translate_net
    from netbrew.errors import UnsupportedConversion
    from netbrew.proto.netbrew_pb2 import NetDef

    path = str(tmp_path / "c2.minidb")
    legacy = NetDef(name="ckpt")
    legacy.op.extend([
        op_def("Save", ["fc_w", "fc_b"], [], db=path, absolute_path=1),
        op_def("Load", [], ["fc_w", "fc_b"], db=path, absolute_path=1, keep_device=1),
    ])  # fmt: skip
    net = translate_net(legacy)
    for op in net.op:
        assert {a.name: a for a in op.arg}["db_type"].s == b"minidb"
    ws = workspace()
    ws.run_operator_once(net.op[0])
    assert [k for k, _ in db_records(path, "minidb")] == ["fc_w#%0", "fc_b#%0"]
    fresh = Workspace()
    fresh.run_operator_once(net.op[1])
    assert_same(fresh.fetch_blob("fc_w"), BLOBS["fc_w"])
    legacy = NetDef(name="reader")
    legacy.op.append(op_def("Load", ["reader"], ["x"], db_type="lmdb"))
    with pytest.raises(UnsupportedConversion, match="Load from DBReader inputs"):
        translate_net(legacy)
