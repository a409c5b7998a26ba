"""brew.db_input: CreateDB in param_init_net, TensorProtosDBInput in net, as Caffe2's brew."""

import inspect

import numpy as np
import pytest

import netbrew.distributed.world as world_module
from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.db import write_tensor_protos
from netbrew.executor import Workspace
from netbrew.netdef.args import args_dict

X = np.arange(12, dtype=np.float32).reshape(6, 2)
Y = np.arange(6, dtype=np.int32)


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "train.minidb")
    write_tensor_protos(path, X, Y)
    return path


def test_adds_create_db_to_init_and_the_input_op_to_net(db):
    model = ModelHelper("m")
    data, label = brew.db_input(model, ["data", "label"], batch_size=4, db=db, db_type="minidb")
    assert (str(data), str(label)) == ("data", "label")
    (create,) = model.param_init_net.proto().op
    assert create.type == "CreateDB" and list(create.output) == [f"dbreader_{db}"]
    assert args_dict(create.arg) == {"db": db, "db_type": "minidb"}
    (read,) = model.net.proto().op
    assert read.type == "TensorProtosDBInput"
    assert list(read.input) == [f"dbreader_{db}"] and list(read.output) == ["data", "label"]
    assert args_dict(read.arg)["batch_size"] == 4
    assert "Emits:" in inspect.getdoc(brew.db_input)


def test_trains_a_model_from_batches_read_from_the_db(db):
    model = ModelHelper("m", seed=0)
    brew.db_input(model, ["data", "label"], 4, db, "minidb")
    brew.fc(model, "data", "fc", dim_in=2, dim_out=6)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.create_net(model.net)
    labels = []
    for _ in range(3):
        ws.run_net(model.net.name)
        assert ws.fetch_blob("fc").shape == (4, 6)
        labels.append(ws.fetch_blob("label").tolist())
    assert labels == [[0, 1, 2, 3], [4, 5, 0, 1], [2, 3, 4, 5]]  # wraps around
    ws.fetch_blob(f"dbreader_{db}").item().close()


def test_one_output_and_shards(db, monkeypatch):
    model = ModelHelper("m")
    out = brew.db_input(model, "data", 2, db, "minidb", num_shards=2, shard_id=1)
    assert str(out) == "data"
    assert args_dict(model.param_init_net.proto().op[0].arg)["shard_id"] == 1
    model2 = ModelHelper("m2")
    fake = type("FakeWorld", (), {"rank": 1, "size": 3})()
    monkeypatch.setattr(world_module, "world", lambda: fake)
    brew.db_input(model2, ["data", "label"], 2, db, "minidb", shard_by_rank=True)
    ws = Workspace()
    ws.run_net_once(model2.param_init_net)
    ws.run_net_once(model2.net)
    assert ws.fetch_blob("label").tolist() == [1, 4]
    ws.fetch_blob(f"dbreader_{db}").item().close()
