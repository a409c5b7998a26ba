"""model_helper, brew with Caffe2's signatures, optimizer, rnn_cell, cnn and utils."""

import numpy as np
import pytest

from netbrew.caffe2.python import brew, cnn, model_helper, optimizer, rnn_cell, utils, workspace


def lenet_like(model, data="data"):
    conv = brew.conv(model, data, "conv", dim_in=1, dim_out=4, kernel=3, pad=1,
                     weight_init=("XavierFill", {}), bias_init=("ConstantFill", {"value": 0.1}),
                     use_cudnn=True, cudnn_exhaustive_search=False, order="NCHW")  # fmt: skip
    pool = brew.max_pool(model, conv, "pool", global_pooling=True)
    fc = brew.fc(model, pool, None, dim_in=4, dim_out=3)
    return brew.softmax(model, fc, "softmax")


def test_caffe2_brew_signatures_build_and_train():
    model = model_helper.ModelHelper(name="m", arg_scope={"order": "NCHW"})
    softmax = lenet_like(model)
    brew.accuracy(model, [softmax, "label"], "accuracy")
    xent = model.LabelCrossEntropy([softmax, "label"], "xent")
    loss = model.AveragedLoss(xent, "loss")
    model.AddGradientOperators([loss])
    with pytest.raises(RuntimeError, match="twice"):
        model.AddGradientOperators([loss])
    opt = optimizer.build_sgd(model, base_learning_rate=0.1, momentum=0.9)
    assert opt.get_auxiliary_parameters()[0] == "optimizer_iteration"
    fc = f"{model.net.Name()}_fc_0"  # blob_out=None: a fresh name
    assert model.GetParams() == ["conv_w", "conv_b", f"{fc}_w", f"{fc}_b"]
    assert set(model.param_to_grad) == set(model.GetParams())
    ops = [op.type for op in model.net.Proto().op]
    assert "GlobalMaxPool" in ops and ops.count("MomentumSGDUpdate") == 4
    nesterov = [a.i for op in model.net.Proto().op for a in op.arg if a.name == "nesterov"]
    assert nesterov == [1, 1, 1, 1]  # Caffe2's build_sgd default
    rng = np.random.default_rng(0)
    workspace.FeedBlob("data", rng.normal(size=(8, 1, 4, 4)).astype(np.float32))
    workspace.FeedBlob("label", rng.integers(0, 3, 8).astype(np.int32))
    workspace.RunNetOnce(model.param_init_net)
    np.testing.assert_allclose(workspace.FetchBlob("conv_b"), 0.1)
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)
    first = float(workspace.FetchBlob("loss"))
    workspace.RunNet(model.net, 30)
    assert float(workspace.FetchBlob("loss")) < first
    assert 0 <= float(workspace.FetchBlob("accuracy")) <= 1


def test_nhwc_and_unsupported_options_are_refused_by_name():
    model = model_helper.ModelHelper(name="nhwc")
    with pytest.raises(ValueError, match="brew.conv: order='NHWC' is not supported"):
        brew.conv(model, "x", "c", 1, 1, kernel=1, order="NHWC")
    with pytest.raises(NotImplementedError, match="max_gradient_norm"):
        optimizer.build_sgd(model, 0.1, max_gradient_norm=1.0)


def test_get_params_by_name_scope():
    from netbrew.caffe2.python import core

    model = model_helper.ModelHelper(name="scoped")
    with core.NameScope("a"):
        brew.fc(model, "x", "fc", 2, 2)
    brew.fc(model, "x", "fc", 2, 2)
    assert model.GetParams("a") == ["a/fc_w", "a/fc_b"]
    assert len(model.GetAllParams()) == 4


def test_lstm_matches_onnx_lstm_and_trains():
    model = model_helper.ModelHelper(name="rnn")
    hidden_all, hidden_last, cell_all, cell_last = rnn_cell.LSTM(
        model, "x", "lengths", ("h0", "c0"), dim_in=3, dim_out=4, scope="lstm", forget_bias=1.0
    )
    loss = model.AveragedLoss(model.ReduceSum(hidden_all, "s", keepdims=0), "loss")
    model.AddGradientOperators([loss])
    workspace.RunNetOnce(model.param_init_net)
    b = workspace.FetchBlob("lstm/B")
    assert b.shape == (1, 32) and b[0, 8:12].tolist() == [1.0] * 4  # forget gate, ONNX order
    rng = np.random.default_rng(0)
    workspace.FeedBlob("x", rng.normal(size=(5, 2, 3)).astype(np.float32))
    workspace.FeedBlob("lengths", np.array([5, 3], np.int32))
    for blob in ("h0", "c0"):
        workspace.FeedBlob(blob, np.zeros((1, 2, 4), np.float32))
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob(hidden_all).shape == (5, 2, 4)
    assert workspace.FetchBlob(hidden_last).shape == workspace.FetchBlob(cell_last).shape
    assert workspace.FetchBlob(model.param_to_grad["lstm/W"]).any()
    with pytest.raises(RuntimeError, match="cell_t_all"):
        workspace.FetchBlob(cell_all)  # ONNX's LSTM gives no per-step cell states


def test_cnn_model_helper_methods_are_brew_helpers():
    model = cnn.CNNModelHelper(order="NCHW", name="old", use_cudnn=True)
    conv = model.Conv("data", "conv", 1, 2, kernel=3, pad=1)
    relu = model.Relu(conv, "relu")
    model.FC(relu, "fc", dim_in=2 * 4 * 4, dim_out=2)
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob("data", np.ones((1, 1, 4, 4), np.float32))
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob("fc").shape == (1, 2)
    with pytest.raises(ValueError, match="NHWC"):
        cnn.CNNModelHelper(order="NHWC")


def test_utils_tensor_round_trip_and_debug():
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    proto = utils.NumpyArrayToCaffe2Tensor(x, "x")
    assert proto.name == "x" and np.array_equal(utils.Caffe2TensorToNumpyArray(proto), x)
    assert utils.MakeArgument("k", 3).i == 3
    with pytest.raises(ZeroDivisionError):
        utils.debug(lambda: 1 / 0)()
