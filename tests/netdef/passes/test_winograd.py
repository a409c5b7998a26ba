"""winograd_convs turns qualifying 3x3 convs into ConvWinograd ops with the same numbers."""

import numpy as np
import pytest
from _nets import assert_same, count, run

from netbrew.executor.predictor import Predictor
from netbrew.netdef import op_def
from netbrew.netdef.passes import optimize, winograd_convs
from netbrew.operators import conv
from netbrew.operators import conv_winograd as cw
from netbrew.proto.netbrew_pb2 import NetDef


@pytest.fixture
def always(monkeypatch):
    """Take the Winograd path at every image size (the tests' images are small)."""
    calls = []
    real = cw.winograd_correlate
    monkeypatch.setattr(cw, "use_winograd", lambda *a: True)
    monkeypatch.setattr(cw, "winograd_correlate", lambda *a: calls.append(a[1].shape) or real(*a))
    monkeypatch.setattr(conv, "winograd", lambda *a: None)  # plain Conv, the reference: im2col
    return calls


def _net():
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.normal(size=shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)

    params = {
        "w1": w(64, 3, 3, 3),  # 3 input channels: too narrow
        "w2": w(64, 64, 3, 3),
        "b2": w(64),
        "w3": w(64, 64, 3, 3),
        "w4": w(64, 64, 1, 1),  # 1x1
        "w5": w(64, 32, 3, 3),  # grouped
    }
    net = NetDef(name="n", external_input=["x", *params], external_output=["y"])
    net.op.extend(
        [
            op_def("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
            op_def("Conv", ["c1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
            op_def("Relu", ["c2"], ["r2"]),
            op_def("Conv", ["r2", "w3"], ["c3"], pads=[0, 1, 2, 1]),
            op_def("Conv", ["c3", "w3"], ["c4"], strides=[2, 2]),  # strided: stays Conv
            op_def("Conv", ["c4", "w4"], ["c5"]),
            op_def("Conv", ["c5", "w5"], ["c6"], group=2, pads=[1, 1, 1, 1]),
            op_def("Conv", ["c6", "w2", "b2"], ["y"], auto_pad="SAME_LOWER"),
        ]
    )
    feeds = {"x": rng.normal(size=(2, 3, 10, 9)).astype(np.float32)}
    return net, params, feeds


def test_qualifying_convs_become_winograd_with_the_same_numbers(always):
    net, params, feeds = _net()
    before = net.SerializeToString()
    out, new_params = winograd_convs(net, params)
    assert net.SerializeToString() == before  # input untouched
    assert [op.type for op in out.op] == [
        "Conv",
        "ConvWinograd",
        "Relu",
        "ConvWinograd",
        "Conv",
        "Conv",
        "Conv",
        "ConvWinograd",
    ]
    assert list(out.op[1].input) == ["c1", "w2", "w2__winograd", "b2"]
    assert set(new_params) - set(params) == {"w2__winograd", "w3__winograd"}  # one per weight
    assert list(out.external_input) == [*net.external_input, "w2__winograd", "w3__winograd"]
    np.testing.assert_array_equal(new_params["w2__winograd"], cw.winograd_weights(params["w2"]))
    assert_same(net, out, {**feeds, **new_params}, atol=1e-4)
    assert len(always) == 3  # each Winograd op took the Winograd path


def test_optimize_fuses_the_relu_first(always):
    net, params, feeds = _net()
    out, new_params = optimize(net, level=2, params=params)
    assert count(out, "ConvWinogradRelu") == 1 and count(out, "Relu") == 0
    (want,) = run(net, {**feeds, **params})
    (got,) = run(out, {**feeds, **new_params})
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_weights_the_net_writes_are_left_alone():
    net, params, _ = _net()
    net.op.insert(0, op_def("Scale", ["w2"], ["w2"], scale=2.0))  # w2 is not a constant
    out, new_params = winograd_convs(net, params)
    assert [op.input[1] for op in out.op if op.type == "ConvWinograd"] == ["w3"]
    assert "w2__winograd" not in new_params
    out, _ = winograd_convs(net, {k: v.astype(np.float16) for k, v in params.items()})
    assert count(out, "ConvWinograd") == 0  # float16 weights: no transform


def test_predictor_runs_winograd_and_survives_a_fed_weight(always):
    net, params, feeds = _net()
    init = NetDef(name="init")
    for name, value in params.items():
        init.op.append(
            op_def("GivenTensorFill", [], [name], shape=list(value.shape), values=value.ravel())
        )
    (want,) = run(net, {**feeds, **params})
    predictor = Predictor(init, net)
    assert any(op.type.startswith("ConvWinograd") for op in predictor.predict_net.op)
    (got,) = predictor.run(feeds).values()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)
    assert always
    # a weight fed with the data no longer matches its transform: that conv runs as Conv
    w3 = params["w3"] * -1.5
    (want,) = run(net, {**feeds, **params, "w3": w3})
    (got,) = predictor.run({**feeds, "w3": w3}).values()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def _one_conv(size, unknown=(), channels=64):
    """A `channels` -> `channels` 3x3 conv whose input's value_info says (1, channels,
    *size), with the dims in `unknown` unknown."""
    from netbrew.proto.netbrew_pb2 import TensorProto, TensorShape

    w = np.ones((channels, channels, 3, 3), np.float32)
    net = NetDef(name="n", external_input=["x", "w"], external_output=["y"])
    net.op.extend([op_def("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])])
    net.value_info.append(
        TensorShape(
            name="x",
            dims=[1, channels, *size],
            unknown_dims=list(unknown),
            data_type=TensorProto.FLOAT,
        )
    )
    return net, {"w": w}


@pytest.mark.parametrize(
    "size, unknown, channels, tile",
    [
        ((96, 96), (), 64, 4),  # 24 * 24 tiles of 4x4: F(4x4) pays
        ((28, 28), (), 64, 4),  # 7 * 7 tiles: just enough
        ((14, 14), (), 512, 2),  # 4 * 4 tiles: too few for F(4x4); F(2x2) pays at 512x512
        ((16, 16), (), 64, 2),  # 4 * 4 tiles: too few for F(4x4); 8 * 8 are enough for F(2x2)
        ((12, 12), (), 64, 0),  # neither would ever pay, so no transform is stored
        ((16, 16), (2, 3), 64, 2),  # size unknown until run time: F(2x2), the op decides then
        ((12, 12), (0,), 64, 0),  # an unknown batch does not matter
    ],
)
def test_known_image_sizes_decide_which_transform_a_conv_gets(size, unknown, channels, tile):
    from netbrew.operators.conv_winograd4 import use_winograd4

    net, params = _one_conv(size, unknown, channels)
    if not {2, 3} & set(unknown):
        assert use_winograd4(channels, channels, size) is (tile == 4)
        if tile < 4:
            assert cw.use_winograd(channels, channels, size) is (tile == 2)
    out, new_params = winograd_convs(net, params)
    assert (out.op[0].type == "ConvWinograd") is (tile > 0)
    assert ("w__winograd4" in new_params) is (tile == 4)
    assert ("w__winograd" in new_params) is (tile == 2)
    if tile:
        assert out.op[0].input[2] == ("w__winograd4" if tile == 4 else "w__winograd")
        shape = (36, channels, channels) if tile == 4 else (16, channels, channels)
        assert new_params[out.op[0].input[2]].shape == shape


def test_onnx_backend_infers_shapes_for_the_pass():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    from netbrew.converters.onnx import backend

    rng = np.random.default_rng(0)
    w = (rng.normal(size=(64, 64, 3, 3)) / 24).astype(np.float32)

    def model(h, w_dim):
        # a Relu first, so the conv's input is an intermediate: only inference sizes it
        graph = helper.make_graph(
            [
                helper.make_node("Relu", ["x"], ["r"]),
                helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1]),
            ],
            "g",
            [helper.make_tensor_value_info("x", T.FLOAT, [1, 64, h, w_dim])],
            [helper.make_tensor_value_info("y", T.FLOAT, None)],
            [numpy_helper.from_array(w, "w")],
        )
        # the newest opset: no version conversion, which would infer the shapes on its own
        newest = onnx.defs.onnx_opset_version()
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", newest)])

    x = rng.normal(size=(1, 64, 8, 8)).astype(np.float32)
    want = backend.prepare(model(8, 8), optimize=False).run([x])[0]
    for dims, kind in (((8, 8), "Conv"), (("h", "w"), "ConvWinograd")):
        rep = backend.prepare(model(*dims))
        assert [op.op.type for op in rep.runtime.ops] == ["Relu", kind]
        np.testing.assert_allclose(rep.run([x])[0], want, rtol=1e-5, atol=1e-5)


def test_onnx_backend_runs_f4_where_it_pays():
    """A 64 -> 64 conv on a 28x28 image gets the F(4x4) transform through the ONNX backend;
    its output (channels-last) feeds a 1x1 conv and a residual Add, and the model's result
    matches onnx's ReferenceEvaluator."""
    pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    from netbrew.converters.onnx import backend

    rng = np.random.default_rng(1)
    w3 = (rng.normal(size=(64, 64, 3, 3)) / 24).astype(np.float32)
    w1 = (rng.normal(size=(64, 64, 1, 1)) / 8).astype(np.float32)
    b3 = rng.normal(size=64).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w3", "b3"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Conv", ["r", "w1"], ["p"]),
            helper.make_node("Add", ["p", "x"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 64, 28, 28])],
        [helper.make_tensor_value_info("y", T.FLOAT, None)],
        [numpy_helper.from_array(v, n) for v, n in ((w3, "w3"), (w1, "w1"), (b3, "b3"))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.normal(size=(1, 64, 28, 28)).astype(np.float32)
    rep = backend.prepare(model)
    first = rep.runtime.ops[0]
    assert first.op.type == "ConvWinogradRelu"
    assert rep.workspace._blobs[first.inputs[2]].shape == (36, 64, 64)
    (got,) = rep.run([x])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "size, strides, reader, kind",
    [
        ((28, 28), 2, "Conv", "hwc"),  # ResNet-50's strided 3x3: the channels-last im2col
        ((28, 28), 2, "ConvRelu", "hwc"),
        ((28, 28), 2, "Concat", "hwc"),  # a Concat copies its inputs in any layout
        ((28, 28), 2, "Relu", ""),  # a non-conv reader would get channels-last input
        ((28, 28), 2, "output", ""),  # so would the caller
        ((14, 14), 2, "Conv", ""),  # a 7x7 output: too small to pay
        ((56, 56), 2, "Conv", ""),  # too big an input to copy channels-last
    ],
)
def test_channels_last_im2col_only_where_convs_read_the_output(size, strides, reader, kind):
    from netbrew.operators.conv_hwc import hwc_weights

    net, params = _one_conv(size)
    rng = np.random.default_rng(3)
    params = {"w": (rng.normal(size=(64, 64, 3, 3)) / 24).astype(np.float32)}
    net.op[0].output[0] = "c"
    net.op[0].arg.extend(op_def("Conv", [], [], strides=[strides, strides]).arg)
    if reader == "output":
        net.external_output[:] = ["c"]
    else:
        params["w2"] = (rng.normal(size=(64, 64, 1, 1)) / 8).astype(np.float32)
        net.external_input.append("w2")
        if reader == "Concat":
            net.op.append(op_def(reader, ["c", "c"], ["y"], axis=1))
        else:
            net.op.append(op_def(reader, ["c", "w2"] if "Conv" in reader else ["c"], ["y"]))
    out, new_params = winograd_convs(net, params)
    assert (out.op[0].type == "ConvWinograd") is bool(kind)
    assert ("w__hwc" in new_params) is (kind == "hwc")
    if kind:
        assert list(out.op[0].input) == ["x", "w", "w__hwc"]
        np.testing.assert_array_equal(new_params["w__hwc"], hwc_weights(params["w"]))
        feeds = {"x": rng.normal(size=(1, 64, *size)).astype(np.float32)}
        assert_same(net, out, {**feeds, **new_params}, atol=1e-4)


def test_squeezenet_expand_conv_takes_the_channels_last_im2col():
    """A stride-1 16 -> 64 channel 3x3 conv at 55x55 whose output a Concat reads (a fire
    module's expand3x3) gets the laid-out weights; the net's output is unchanged."""
    from netbrew.operators.conv_hwc import hwc_weights

    net, params = _one_conv((55, 55), channels=16)
    rng = np.random.default_rng(4)
    params = {"w": (rng.normal(size=(64, 16, 3, 3)) / 12).astype(np.float32)}
    net.op[0].output[0] = "c"
    net.op.append(op_def("Concat", ["c", "c"], ["y"], axis=1))
    out, new_params = winograd_convs(net, params)
    assert out.op[0].type == "ConvWinograd"
    np.testing.assert_array_equal(new_params["w__hwc"], hwc_weights(params["w"]))
    feeds = {"x": rng.normal(size=(1, 16, 55, 55)).astype(np.float32)}
    assert_same(net, out, {**feeds, **new_params}, atol=1e-4)


def test_narrowing_conv_keeps_kn2row():
    """DenseNet's 128 -> 32 channel 3x3 convs, read by a Concat, stay on conv_shift's
    kn2row: no laid-out weights."""
    net, _ = _one_conv((14, 14), channels=128)
    params = {"w": np.ones((32, 128, 3, 3), np.float32)}
    net.op[0].output[0] = "c"
    net.op.append(op_def("Concat", ["c", "c"], ["y"], axis=1))
    out, new_params = winograd_convs(net, params)
    assert out.op[0].type == "Conv" and "w__hwc" not in new_params
