"""save_model / load_model: pruned inference nets, trained parameters, exact resumption."""

import re

import numpy as np
import pytest

import netbrew as nb
from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.errors import FeedError, ModelLoadError
from netbrew.executor import Workspace
from netbrew.netdef import load_net


def small_cnn(dropout=True):
    model = ModelHelper("cnn", seed=7)
    c = brew.conv(model, "data", "conv", 1, 4, kernel=3, pad=1)
    bn = brew.spatial_bn(model, c, "bn", 4)
    r = brew.relu(model, bn, "relu")
    d = brew.dropout(model, r, "drop", ratio=0.25, seed=1) if dropout else r
    p = brew.max_pool(model, d, "pool", kernel=2, stride=2)
    fc = brew.fc(model, p, "fc", 4 * 2 * 2, 3)
    sm = brew.softmax(model, fc, "prob")
    xent = model.net.LabelCrossEntropy([sm, "label"], "xent")
    model.net.AveragedLoss(xent, "loss")
    model.add_gradient_operators(["loss"])
    brew.optimizer.build_sgd(model, 0.1, momentum=0.9)
    return model


def data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(6, 1, 4, 4)).astype(np.float32), rng.integers(0, 3, 6).astype(np.int32)


def start(model):
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    x, y = data()
    ws.feed_blob("data", x)
    ws.feed_blob("label", y)
    ws.create_net(model.net)
    return ws


def test_saved_model_is_pruned_inference_net(tmp_path):
    model = small_cnn()
    ws = start(model)
    ws.run_net(model.net.name, num_iter=3)
    nb.save_model(tmp_path, ws, model, inputs=["data"], outputs=["prob"])
    predict = load_net(tmp_path / "predict_net.pb")
    types = [op.type for op in predict.op]
    assert types == ["Conv", "BatchNormalization", "Relu", "Dropout", "MaxPool", "FC", "Softmax"]
    bn = predict.op[1]
    assert len(bn.output) == 1 and {a.name: a.i for a in bn.arg}["training_mode"] == 0
    assert list(predict.op[3].input) == ["relu"] and list(predict.op[3].output) == ["drop"]
    assert predict.external_input[0] == "data" and list(predict.external_output) == ["prob"]
    assert "bn_rm" in predict.external_input and "label" not in predict.external_input
    info = predict.value_info[0]
    assert info.name == "data" and list(info.unknown_dims) == [0]

    predictor = nb.load_model(tmp_path)
    x = data(1)[0]
    out = predictor.run({"data": x})["prob"]
    assert out.shape == (6, 3)
    # inference uses the running statistics, which 3 training steps moved off their init
    rm = ws.fetch_blob("bn_rm")
    assert np.abs(rm).max() > 0
    with pytest.raises(FeedError, match="input 'data' has dtype float64, expected float32"):
        predictor.run({"data": x.astype(np.float64)})


def test_save_load_continue_equals_uninterrupted(tmp_path):
    # Dropout's random stream is not part of a checkpoint, so this model has none.
    params = None
    for interrupted in (False, True):
        model = small_cnn(dropout=False)
        ws = start(model)
        ws.run_net(model.net.name, num_iter=2)
        if interrupted:
            blobs = {p: ws.fetch_blob(p) for p in model.get_checkpoint_blobs()}
            nb.save_blobs(blobs, tmp_path / "checkpoint.pb")
            model = small_cnn(dropout=False)
            ws = start(model)
            for name, value in nb.load_blobs(tmp_path / "checkpoint.pb").items():
                ws.feed_blob(name, value)
        ws.run_net(model.net.name, num_iter=3)
        result = {p: ws.fetch_blob(p).copy() for p in model.get_checkpoint_blobs()}
        if params is None:
            params = result
    assert params.keys() == result.keys()
    for name in params:
        np.testing.assert_array_equal(result[name], params[name], err_msg=name)


@pytest.mark.parametrize("empty", ["init_net.pb", "predict_net.pb"])
def test_load_model_with_an_empty_file_names_it(tmp_path, empty):
    model = small_cnn()
    ws = start(model)
    nb.save_model(tmp_path, ws, model, inputs=["data"], outputs=["prob"])
    (tmp_path / empty).write_bytes(b"")
    with pytest.raises(ModelLoadError, match=re.escape(str(tmp_path / empty))):
        nb.load_model(tmp_path)


def test_load_model_from_a_missing_folder(tmp_path):
    with pytest.raises(ModelLoadError, match=r"init_net\.pb: no such file"):
        nb.load_model(tmp_path / "nothing")
