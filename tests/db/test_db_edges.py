"""Model and data I/O edges a Caffe2 user met: parameters of every dtype saved exactly,
bytes records with trailing NULs, Save of a non-tensor blob, and Caffe2 programs that
build their DB reader with core.Net."""

import numpy as np
import pytest

import netbrew as nb
from netbrew.caffe2.python import core, mobile_exporter, workspace
from netbrew.db import read_tensor_protos, write_tensor_protos
from netbrew.netdef import Net

PARAMS = {
    "u8": np.array([1, 200, 255], np.uint8),
    "f64": np.array([0.1, 1e300]),
    "f16": np.array([1.5, -2.25], np.float16),
    "i16": np.array([-300], np.int16),
    "i64": np.array([2**40], np.int64),
    "b": np.array([True, False]),
}


def test_save_model_and_mobile_exporter_keep_every_dtype_exactly(tmp_path):
    ws, net = nb.Workspace(), Net("ident")
    net.add_external_input("x", *PARAMS)
    for name, value in PARAMS.items():
        ws.feed_blob(name, value)
        net.Identity([name], f"{name}_out")
    net.Identity(["x"], "y")
    net.add_external_output("y", *(f"{n}_out" for n in PARAMS))
    nb.save_model(tmp_path, ws, net, inputs=["x"], outputs=["y", *(f"{n}_out" for n in PARAMS)])
    out = nb.load_model(tmp_path).run({"x": np.zeros(1, np.float32)})
    workspace.ResetWorkspace()
    for name, value in PARAMS.items():
        workspace.FeedBlob(name, value)
    init, _ = mobile_exporter.Export(workspace, net.proto(), list(PARAMS))
    workspace.ResetWorkspace()
    workspace.RunNetOnce(init)
    for name, value in PARAMS.items():
        for got in (out[f"{name}_out"], workspace.FetchBlob(name)):
            assert got.dtype == value.dtype
            np.testing.assert_array_equal(got, value)


def test_bytes_records_keep_trailing_nuls(tmp_path):
    payloads = np.empty(2, object)
    payloads[0], payloads[1] = b"\x89PNG\x00\x00\x00", b"\xff\x00"
    path = tmp_path / "s.minidb"
    write_tensor_protos(path, payloads, np.array([0, 1], np.int32))
    back = [t[0].item() for _, t in read_tensor_protos(path)]
    assert back == list(payloads)


def test_save_refuses_a_blob_that_is_not_a_tensor(tmp_path):
    path = tmp_path / "d.minidb"
    write_tensor_protos(path, np.zeros((2, 1), np.float32))
    reader = core.CreateOperator("CreateDB", [], ["reader"], db=str(path), db_type="minidb")
    workspace.RunOperatorOnce(reader)
    save = core.CreateOperator("Save", ["reader"], [], db=str(tmp_path / "o.minidb"),
                               db_type="minidb")  # fmt: skip
    with pytest.raises(nb.OperatorError, match="blob .reader. holds a DBReader, not a tensor"):
        workspace.RunOperatorOnce(save)


def test_a_caffe2_program_builds_its_db_input_with_core_net(tmp_path):
    path = str(tmp_path / "train.minidb")
    images = np.arange(16, dtype=np.uint8).reshape(4, 1, 2, 2)
    write_tensor_protos(path, images, np.arange(4, dtype=np.int32))
    init, train = core.Net("init"), core.Net("train")
    reader = init.CreateDB([], "dbreader", db=path, db_type="minidb")
    train.TensorProtosDBInput([reader], ["data", "label"], batch_size=2)
    workspace.RunNetOnce(init)
    workspace.RunNetOnce(train)
    np.testing.assert_array_equal(workspace.FetchBlob("data"), images[:2])
    np.testing.assert_array_equal(workspace.FetchBlob("label"), [0, 1])


def test_a_net_answers_hasattr_for_names_that_are_not_ops():
    net = Net("n")
    assert not hasattr(net, "param_init_net") and hasattr(net, "Relu")
    with pytest.raises(AttributeError, match="Did you mean: Relu"):
        net.Reluu  # noqa: B018
