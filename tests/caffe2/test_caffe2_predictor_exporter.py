"""predictor_exporter: a predictor saved to a minidb/lmdb DB in Caffe2's layout, and back."""

import numpy as np
import pytest

from netbrew.caffe2.python import brew, model_helper, workspace
from netbrew.caffe2.python import predictor_exporter as pe
from netbrew.caffe2.python.predictor_constants import predictor_constants as pc
from netbrew.db import create_db
from netbrew.errors import ModelLoadError
from netbrew.proto import netbrew_pb2 as pb

DB_TYPES = ["minidb", "lmdb"]

# Field numbers of Caffe2's caffe2/proto/metanet.proto (its last version).
METANET_FIELDS = {
    "ModelInfo": {"project": 1, "modelClass": 2, "version": 3, "predictorType": 4, "modelId": 5},
    "BlobsMap": {"key": 1, "value": 2},
    "NetsMap": {"key": 1, "value": 2},
    "PlansMap": {"key": 1, "value": 2},
    "StringMap": {"key": 1, "value": 2},
    "MetaNetDef": {
        "blobs": 1, "nets": 2, "modelInfo": 3, "plans": 4, "applicationSpecificInfo": 5,
        "blobsOrder": 6, "preLoadBlobs": 7, "tensorBoundShapes": 8,
        "requestOnlyEmbeddings": 9, "aotConfig": 10,
    },
}  # fmt: skip


def _lenet():
    """A brew LeNet on 1x12x12 images, initialised, with a batch of data in the workspace."""
    model = model_helper.ModelHelper(name="lenet")
    conv1 = brew.conv(model, "data", "conv1", dim_in=1, dim_out=4, kernel=3)
    pool1 = brew.max_pool(model, conv1, "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", dim_in=4, dim_out=6, kernel=2)
    pool2 = brew.max_pool(model, conv2, "pool2", kernel=2, stride=2)
    fc3 = brew.fc(model, pool2, "fc3", dim_in=6 * 2 * 2, dim_out=16)
    relu = brew.relu(model, fc3, "relu3")
    pred = brew.fc(model, relu, "pred", dim_in=16, dim_out=10)
    brew.softmax(model, pred, "softmax")
    workspace.RunNetOnce(model.param_init_net)
    x = np.random.default_rng(0).random((5, 1, 12, 12), dtype=np.float32)
    workspace.FeedBlob("data", x)
    workspace.RunNetOnce(model.net)
    return model, x, workspace.FetchBlob("softmax")


def _keys(path, db_type):
    with create_db(db_type, path, "read") as db:
        return [k for k, _ in db.new_cursor()]


def _value(path, db_type, key):
    with create_db(db_type, path, "read") as db:
        return dict(db.new_cursor())[key]


@pytest.fixture(params=DB_TYPES)
def db_type(request):
    if request.param == "lmdb":
        pytest.importorskip("lmdb", reason="lmdb is in the [db] extra")
    return request.param


def test_save_and_prepare_round_trips_a_lenet(tmp_path, db_type):
    model, x, want = _lenet()
    params = {p: workspace.FetchBlob(str(p)) for p in model.params}
    path = str(tmp_path / f"lenet.{db_type}")
    meta = pe.PredictorExportMeta(model.net, model.params, ["data"], ["softmax"])
    pe.save_to_db(db_type, path, meta)

    workspace.ResetWorkspace()
    net = pe.prepare_prediction_net(path, db_type)
    for name, value in params.items():  # the global init net loaded the parameters
        np.testing.assert_array_equal(workspace.FetchBlob(name), value)
    assert not workspace.FetchBlob("data").any()  # the predict init net zeroed it
    assert net.Proto().external_input[:] == ["data", *map(str, model.params)]
    assert net.Proto().external_output[:] == ["softmax"]
    workspace.FeedBlob("data", x)
    workspace.RunNet(net)
    np.testing.assert_array_equal(workspace.FetchBlob("softmax"), want)
    y = np.random.default_rng(1).random((2, 1, 12, 12), dtype=np.float32)
    workspace.FeedBlob("data", y)
    workspace.RunNet(net.Name())
    got = workspace.FetchBlob("softmax")
    assert got.shape == (2, 10)
    np.testing.assert_allclose(got.sum(1), 1, rtol=1e-5)


def test_db_layout_is_caffe2s(tmp_path, db_type):
    model, _, _ = _lenet()
    path = str(tmp_path / f"lenet.{db_type}")
    pe.save_to_db(db_type, path, pe.PredictorExportMeta(model.net, model.params, ["data"],
                                                         ["softmax"]))  # fmt: skip
    keys = _keys(path, db_type)
    assert keys[0] == "!!META_NET_DEF"  # first, so the reader meets it before the params
    assert sorted(keys[1:]) == sorted(f"{p}#%0" for p in model.params)
    record = pb.BlobProto.FromString(_value(path, db_type, "!!META_NET_DEF"))
    assert record.name == "!!META_NET_DEF" and record.type == "std::string"
    assert not record.HasField("tensor")
    meta = pb.MetaNetDef.FromString(record.content)
    blobs = {b.key: list(b.value) for b in meta.blobs}
    assert blobs == {
        "PARAMETERS_BLOB_TYPE": [str(p) for p in model.params],
        "INPUTS_BLOB_TYPE": ["data"],
        "OUTPUTS_BLOB_TYPE": ["softmax"],
    }
    nets = {n.key: n.value for n in meta.nets}
    assert list(nets) == ["PREDICT_INIT_NET_TYPE", "GLOBAL_INIT_NET_TYPE", "PREDICT_NET_TYPE"]
    (load,) = nets["GLOBAL_INIT_NET_TYPE"].op
    assert load.type == "Load" and list(load.input) == ["!!PREDICTOR_DBREADER"]
    assert list(load.output) == [str(p) for p in model.params]
    fills = nets["PREDICT_INIT_NET_TYPE"].op
    assert [(op.type, list(op.output)) for op in fills] == [
        ("ConstantFill", ["data"]),
        ("ConstantFill", ["softmax"]),
    ]
    assert list(fills[0].arg[0].ints) == [5, 1, 12, 12]
    w = pb.BlobProto.FromString(_value(path, db_type, "conv1_w#%0"))
    assert w.type == "Tensor" and list(w.tensor.dims) == [4, 1, 3, 3]
    # load_from_db returns the same MetaNetDef and leaves it in the workspace
    assert pe.load_from_db(path, db_type) == meta
    assert workspace.FetchBlob("!!META_NET_DEF").item() == record.content


def test_named_predictor_meta_and_model_info(tmp_path):
    model, _, _ = _lenet()
    meta = pe.PredictorExportMeta(model.net, model.params, ["data"], ["softmax"], name="m",
                                  net_type="dag", num_workers=2, trainer_prefix="tr")  # fmt: skip
    assert meta.predict_net_name() == "PREDICT_NET_TYPE_m"
    assert meta.train_plan_name() == "tr_TRAIN_PLAN_TYPE_m"
    meta_net_def = pe.get_meta_net_def(meta)
    assert [b.key for b in meta_net_def.blobs] == [
        "PARAMETERS_BLOB_TYPE_m", "INPUTS_BLOB_TYPE_m", "OUTPUTS_BLOB_TYPE_m"
    ]  # fmt: skip
    predict = [n.value for n in meta_net_def.nets if n.key == "PREDICT_NET_TYPE_m"][0]
    assert (predict.type, predict.num_workers) == ("dag", 2)
    pe.set_model_info(meta_net_def, "proj", "LeNet", "1")
    info = pb.MetaNetDef.FromString(meta_net_def.SerializeToString()).modelInfo
    assert (info.project, info.modelClass, info.version) == ("proj", "LeNet", "1")
    assert info.predictorType == pc.SINGLE_PREDICTOR


def test_shapes_and_meta_checks(tmp_path):
    model, _, _ = _lenet()
    meta = pe.PredictorExportMeta(model.net, model.params, ["data"], ["softmax"],
                                  shapes={"data": (1, 1, 12, 12), "softmax": (1, 10)})  # fmt: skip
    init = [n.value for n in pe.get_meta_net_def(meta).nets if n.key == "PREDICT_INIT_NET_TYPE"]
    assert list(init[0].op[0].arg[0].ints) == [1, 1, 12, 12]
    with pytest.raises(ValueError, match="disjoint"):
        pe.PredictorExportMeta(model.net, model.params, ["conv1_w"], ["softmax"])
    with pytest.raises(ValueError, match="unique"):
        pe.PredictorExportMeta(model.net, model.params, ["data", "data"], ["softmax"])
    with pytest.raises(ValueError, match="nowhere not in workspace"):
        pe.get_meta_net_def(pe.PredictorExportMeta(model.net, [], ["nowhere"], []))


def test_device_option_is_set_on_every_op(tmp_path):
    model, _, _ = _lenet()
    path = str(tmp_path / "lenet.minidb")
    pe.save_to_db("minidb", path, pe.PredictorExportMeta(model.net, model.params, ["data"],
                                                         ["softmax"]))  # fmt: skip
    option = pb.DeviceOption(device_type=0, device_id=0, random_seed=7)
    meta = pe.load_from_db(path, "minidb", device_option=option)
    assert all(op.device_option == option for n in meta.nets for op in n.value.op)


def test_missing_db_gives_model_load_error(tmp_path, db_type):
    path = str(tmp_path / f"absent.{db_type}")
    with pytest.raises(ModelLoadError, match="cannot load the predictor DB .*absent"):
        pe.prepare_prediction_net(path, db_type)
    with pytest.raises(ModelLoadError, match="no such"):
        pe.load_from_db(path, db_type)


def test_a_db_without_meta_net_def_is_refused(tmp_path):
    path = str(tmp_path / "params.minidb")
    workspace.FeedBlob("w", np.ones(3, np.float32))
    workspace.RunOperatorOnce(pe.core.CreateOperator("Save", ["w"], [], db=path, db_type="minidb"))
    with pytest.raises(ModelLoadError, match="no '!!META_NET_DEF' record: it is not a predictor"):
        pe.prepare_prediction_net(path, "minidb")


def test_metanet_field_numbers_match_caffe2():
    for message, fields in METANET_FIELDS.items():
        descriptor = getattr(pb, message).DESCRIPTOR
        assert {f.name: f.number for f in descriptor.fields} == fields, message
    assert pb.ModelInfo().predictorType == "SINGLE_PREDICTOR"


def _read_varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def _fields(data):
    """(field number, wire type, payload) of each top-level field, decoded by hand."""
    out, i = [], 0
    while i < len(data):
        tag, i = _read_varint(data, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            payload, i = _read_varint(data, i)
        elif wire == 2:
            size, i = _read_varint(data, i)
            payload, i = data[i : i + size], i + size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, payload))
    return out


def test_metanet_wire_format_is_caffe2s():
    meta = pb.MetaNetDef()
    meta.blobs.add(key="INPUTS_BLOB_TYPE", value=["data"])
    meta.nets.add(key="PREDICT_NET_TYPE", value=pb.NetDef(name="p"))
    meta.modelInfo.project = "proj"
    meta.plans.add(key="TRAIN_PLAN_TYPE", value=pb.PlanDef(name="t"))
    meta.applicationSpecificInfo.add(key="k", value="v")
    meta.blobsOrder.append("w")
    meta.preLoadBlobs.append("e")
    meta.tensorBoundShapes.max_batch_size = 8
    meta.requestOnlyEmbeddings.append("r")
    meta.aotConfig.max_batch_size = 1
    meta.aotConfig.max_seq_size = 2
    meta.aotConfig.in_batch_broadcast = True
    fields = _fields(meta.SerializeToString())
    assert [(n, w) for n, w, _ in fields] == [(n, 2) for n in range(1, 11)]
    by_number = {n: p for n, _, p in fields}
    assert _fields(by_number[1]) == [(1, 2, b"INPUTS_BLOB_TYPE"), (2, 2, b"data")]
    assert _fields(by_number[2]) == [(1, 2, b"PREDICT_NET_TYPE"), (2, 2, b"\n\x01p")]
    assert _fields(by_number[3]) == [(1, 2, b"proj")]  # predictorType's default is not sent
    assert _fields(by_number[5]) == [(1, 2, b"k"), (2, 2, b"v")]
    assert _fields(by_number[8]) == [(2, 0, 8)]  # TensorBoundShapes.max_batch_size
    assert _fields(by_number[10]) == [(1, 0, 1), (2, 0, 2), (3, 0, 1)]
    assert pb.MetaNetDef.FromString(meta.SerializeToString()) == meta


def test_caffe2_module_paths(tmp_path):
    import netbrew.caffe2

    netbrew.caffe2.install()
    try:
        from caffe2.proto import metanet_pb2
        from caffe2.python.predictor import predictor_py_utils as utils
        from caffe2.python.predictor.predictor_exporter import save_to_db
        from caffe2.python.predictor_constants import predictor_constants
    finally:
        netbrew.caffe2.uninstall()
    assert metanet_pb2.MetaNetDef is pb.MetaNetDef and save_to_db is pe.save_to_db
    model, _, _ = _lenet()
    path = str(tmp_path / "lenet.minidb")
    save_to_db("minidb", path, pe.PredictorExportMeta(model.net, model.params, ["data"],
                                                      ["softmax"]))  # fmt: skip
    meta = pe.load_from_db(path, "minidb")
    assert list(utils.GetBlobs(meta, predictor_constants.INPUTS_BLOB_TYPE)) == ["data"]
    assert utils.GetBlobs(meta, "nothing") == []
    assert utils.GetNet(meta, predictor_constants.PREDICT_NET_TYPE).op[0].type == "Conv"
    utils.AddBlobs(meta, "extra", ["a"])
    utils.AddNet(meta, "n", pb.NetDef(name="n"))
    assert list(utils.GetBlobs(meta, "extra")) == ["a"] and utils.GetNet(meta, "n").name == "n"


def test_extra_init_net_and_save_arguments(tmp_path):
    model, x, want = _lenet()
    extra = model_helper.ModelHelper(name="extra")
    extra.param_init_net.ConstantFill([], "scale", shape=[1], value=2.0)
    path = str(tmp_path / "lenet.minidb")
    meta = pe.PredictorExportMeta(model.net, model.params, ["data"], ["softmax"],
                                  extra_init_net=extra.param_init_net)  # fmt: skip
    pe.save_to_db("minidb", path, meta, chunk_size=10)  # goes to the Save op
    keys = _keys(path, "minidb")
    assert keys[0] == "!!META_NET_DEF" and "conv1_w#%3" in keys  # 36 values, 4 chunks
    workspace.ResetWorkspace()
    net = pe.prepare_prediction_net(path, "minidb")
    np.testing.assert_array_equal(workspace.FetchBlob("scale"), [2.0])
    workspace.FeedBlob("data", x)
    workspace.RunNet(net)
    np.testing.assert_array_equal(workspace.FetchBlob("softmax"), want)
