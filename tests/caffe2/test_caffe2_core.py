"""core.Net takes Caffe2's spellings and translates them as ops are added."""

import numpy as np
import pytest

from netbrew.caffe2.proto import caffe2_pb2
from netbrew.caffe2.python import core, workspace
from netbrew.errors import DeviceFallbackWarning, SchemaError, UnknownOperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net as NativeNet


def conv_reference(x, w, b, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, wd = x.shape
    m, _, k, _ = w.shape
    out = np.zeros((n, m, h - k + 1, wd - k + 1), np.float32)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.tensordot(x[:, :, i : i + k, j : j + k], w, ([1, 2, 3], [1, 2, 3]))
    return out + b[None, :, None, None]


def test_conv_in_caffe2_spellings_matches_numpy():
    rng = np.random.default_rng(0)
    x, w, b = (rng.normal(size=s).astype(np.float32) for s in [(2, 3, 5, 5), (4, 3, 3, 3), (4,)])
    net = core.Net("conv")
    net.Conv(["x", "w", "b"], "y", kernel=3, pad=1, stride=1, order="NCHW", use_cudnn=1,
             cudnn_exhaustive_search=0, engine="CUDNN")  # fmt: skip
    assert [op.type for op in net.Proto().op] == ["Conv"]
    for name, value in (("x", x), ("w", w), ("b", b)):
        workspace.FeedBlob(name, value)
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob("y"), conv_reference(x, w, b, 1), atol=1e-4)


def test_softmax_keeps_caffe2s_flattening_axis():
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    net = core.Net("softmax")
    net.Softmax("x", "y")  # Caffe2: rows of the (2, 12) flattening, not the last axis
    workspace.FeedBlob("x", x)
    workspace.RunNetOnce(net)
    flat = np.exp(x.reshape(2, 12))
    np.testing.assert_allclose(
        workspace.FetchBlob("y"), (flat / flat.sum(1, keepdims=True)).reshape(x.shape), rtol=1e-5
    )


def test_reshape_gives_its_old_shape_and_chaining_works():
    net = core.Net("reshape")
    x = net.AddExternalInput("x")
    y, old = x.Reshape([], ["y", "old"], shape=[-1, 2])
    y.Relu([], "z")
    workspace.FeedBlob("x", -np.arange(6, dtype=np.float32).reshape(3, 2, 1))
    workspace.RunNetOnce(net)
    assert workspace.FetchBlob("y").shape == (3, 2)
    assert workspace.FetchBlob("old").tolist() == [3, 2, 1]
    assert not workspace.FetchBlob("z").any()


def test_layout_free_ops_ignore_order_and_native_nets_still_refuse_it():
    net = core.Net("relu")
    net.Relu("x", "y", order="NHWC", run_once=0)
    assert not net.Proto().op[0].arg
    native = NativeNet("native")
    native.Relu("x", "y", order="NCHW")
    ws = Workspace()
    ws.feed_blob("x", np.ones(2, np.float32))
    with pytest.raises(SchemaError, match="order"):
        ws.run_net_once(native)


def test_nets_get_unique_names_and_clones_remap_blobs():
    a, b = core.Net("same"), core.Net("same")
    assert a.Name() != b.Name() and b.Name().startswith("same_")
    a.Relu("x", "y")
    clone = a.Clone("copy", blob_remap={"x": "x2"})
    assert list(clone.Proto().op[0].input) == ["x2"] and clone.Name().startswith("copy")
    refs = a.AddExternalInputs("p", "q")
    assert refs == ["p", "q"] and a.Proto().external_input[:] == ["p", "q"]


def test_add_gradient_operators_on_a_core_net():
    net = core.Net("grad")
    net.Mul(["x", "w"], "y")
    net.AveragedLoss("y", "loss")
    grads = net.AddGradientOperators(["loss"])
    workspace.FeedBlob("x", np.array([1.0, 2.0], np.float32))
    workspace.FeedBlob("w", np.array([3.0, 4.0], np.float32))
    workspace.RunNetOnce(net)
    np.testing.assert_allclose(workspace.FetchBlob(grads["w"]), [0.5, 1.0])


def test_unknown_ops_and_refused_arguments_name_the_op():
    net = core.Net("bad")
    with pytest.raises(UnknownOperatorError, match="Relu"):
        net.Rleu("x", "y")
    with pytest.raises(Exception, match="Conv"):
        net.Conv(["x", "w"], "y", kernel=3, bogus_argument=1)


def test_create_operator_keeps_caffe2_spellings_until_it_runs():
    op = core.CreateOperator("Conv", ["x", "w"], ["y"], kernel=1, order="NCHW")
    assert {a.name for a in op.arg} == {"kernel", "order"}
    workspace.FeedBlob("x", np.ones((1, 2, 2, 2), np.float32))
    workspace.FeedBlob("w", np.full((3, 2, 1, 1), 0.5, np.float32))
    workspace.RunOperatorOnce(op.SerializeToString())
    np.testing.assert_allclose(workspace.FetchBlob("y"), np.ones((1, 3, 2, 2)))


def test_a_gpu_device_scope_runs_on_the_cpu_with_one_warning():
    with pytest.warns(DeviceFallbackWarning, match="CUDA device 0.*runs on the CPU"):
        with core.DeviceScope(core.DeviceOption(caffe2_pb2.CUDA, 0)):
            net = core.Net("gpu")
            net.Relu("x", "y")
    assert net.Proto().op[0].device_option.device_type == caffe2_pb2.CPU
    with core.NameScope("block"):
        assert core.ScopedName("w") == "block/w"


def test_a_gpu_net_built_elsewhere_runs_on_the_cpu():
    proto = caffe2_pb2.NetDef(name="from_gpu")
    op = proto.op.add(type="Relu", input=["x"], output=["y"])
    op.device_option.device_type = caffe2_pb2.CUDA
    workspace.FeedBlob("x", np.array([-1.0, 1.0], np.float32))
    with pytest.warns(DeviceFallbackWarning):
        workspace.CreateNet(proto.SerializeToString())
    workspace.RunNet("from_gpu")
    assert workspace.FetchBlob("y").tolist() == [0.0, 1.0]


def test_run_all_on_gpu_without_a_gpu_runs_on_the_cpu():
    net = core.Net("all_gpu")
    net.Relu("x", "y")
    with pytest.warns(DeviceFallbackWarning, match="RunAllOnGPU"):
        net.RunAllOnGPU()
    assert net.Proto().op[0].device_option.device_type == caffe2_pb2.CPU
    workspace.FeedBlob("x", np.array([-1.0], np.float32))
    workspace.RunNetOnce(net)
    assert workspace.FetchBlob("y").tolist() == [0.0]
