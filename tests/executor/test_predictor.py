"""Predictor: runs init_net once, checks feeds, returns outputs by name."""

import numpy as np
import pytest

from netbrew.errors import FeedError
from netbrew.executor import Predictor
from netbrew.netdef import Net
from netbrew.proto.netbrew_pb2 import TensorProto, TensorShape


def model(with_info=True):
    init = Net("init")
    init.GivenTensorFill([], "w", shape=[3, 2], values=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    net = Net("predict")
    net.add_external_input("data", "w")
    net.MatMul(["data", "w"], "y").Relu([], "out")
    net.add_external_output("out")
    if with_info:
        net.proto().value_info.append(
            TensorShape(name="data", dims=[-1, 3], unknown_dims=[0], data_type=TensorProto.FLOAT,
                        dim_names=["batch", ""])
        )  # fmt: skip
    return init, net


def test_run_returns_outputs_by_name():
    predictor = Predictor(*model())
    x = np.array([[1, 0, -1], [0, 1, 0]], np.float32)
    out = predictor.run({"data": x})
    w = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    assert list(out) == ["out"]
    np.testing.assert_array_equal(out["out"], np.maximum(x @ w, 0))
    assert predictor.input_names == ["data"]


def test_missing_feed():
    with pytest.raises(FeedError, match=r"missing input 'data' \(expected float32\[batch, 3\]\)"):
        Predictor(*model()).run({})


def test_unexpected_feed():
    with pytest.raises(FeedError, match=r"unexpected input 'label'; the net's inputs are: data"):
        Predictor(*model()).run({"data": np.ones((1, 3), np.float32), "label": 1})


def test_wrong_dtype():
    with pytest.raises(FeedError, match=r"input 'data' has dtype float64, expected float32"):
        Predictor(*model()).run({"data": np.ones((1, 3))})


def test_wrong_rank():
    with pytest.raises(FeedError, match=r"input 'data' has 1 dims \[3\], expected 2"):
        Predictor(*model()).run({"data": np.ones(3, np.float32)})


def test_without_value_info_kernel_checks_still_name_the_blob():
    from netbrew.errors import OperatorError

    predictor = Predictor(*model(with_info=False))
    with pytest.raises(OperatorError, match=r"(?s)op #0 MatMul.*data: float32\[2, 5\]"):
        predictor.run({"data": np.ones((2, 5), np.float32)})


def test_file_ops_are_refused():
    init, net = model()
    net.proto().op.add(type="Save", input=["out"])
    with pytest.raises(Exception, match=r"contains Save.*allow_file_ops=True"):
        Predictor(init, net)


def test_inference_passes_are_on_by_default_and_can_be_turned_off():
    from netbrew import brew
    from netbrew.brew import ModelHelper

    model = ModelHelper("cbr", seed=0)
    c = brew.conv(model, "data", "conv", 2, 4, kernel=3, pad=1)
    b = brew.spatial_bn(model, c, "bn", 4, is_test=True)
    brew.relu(model, b, "out")
    model.net.add_external_output("out")
    model.net.add_external_input("data")
    init = model.param_init_net.proto()
    stats = init.op.add(type="ConstantFill", output=["bn_rv"])
    stats.arg.add(name="shape", ints=[4])
    stats.arg.add(name="value", f=2.5)
    x = np.random.default_rng(0).normal(size=(2, 2, 5, 5)).astype(np.float32)
    fast = Predictor(init, model.net)
    plain = Predictor(init, model.net, optimize=False)
    assert [op.type for op in fast.predict_net.op] == ["ConvRelu"]
    assert [op.type for op in plain.predict_net.op] == ["Conv", "BatchNormalization", "Relu"]
    np.testing.assert_allclose(fast.run({"data": x})["out"], plain.run({"data": x})["out"],
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def test_profile_times_the_optimised_net_and_prints_nothing(capsys):
    predictor = Predictor(*model())
    x = np.array([[1, 0, -1], [0, 1, 0]], np.float32)
    profile = predictor.profile({"data": x}, num_iter=3)
    assert capsys.readouterr().out == ""
    assert profile.iterations == 3
    ops = [op.type for op in predictor.predict_net.op]
    assert len(profile.records) == 3 * len(ops)
    assert {r.op_type for r in profile.rows()} == set(ops)
    assert all(r.calls == 3 for r in profile.op_rows())
    # the profiled runs left nothing behind: a plain run still gives the right numbers
    w = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(predictor.run({"data": x})["out"], np.maximum(x @ w, 0))
    with pytest.raises(FeedError, match="missing input 'data'"):
        predictor.profile({})
    with pytest.raises(ValueError, match="num_iter >= 1 and warmup >= 0, got 0 and 1"):
        predictor.profile({"data": x}, num_iter=0)
