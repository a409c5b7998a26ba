"""Workspace: blobs, nets, runs, and the context carried by OperatorError."""

import numpy as np
import pytest

from netbrew.errors import BlobNotFoundError, OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def


def test_feed_fetch_has_blobs_reset():
    ws = Workspace()
    ws.feed_blob("b", [1, 2])
    ws.feed_blob("a", np.zeros(3, np.float32))
    assert ws.has_blob("a") and not ws.has_blob("c")
    assert ws.blobs() == ["a", "b"]
    np.testing.assert_array_equal(ws.fetch_blob("b"), [1, 2])
    ws.reset()
    assert ws.blobs() == []


def test_fetch_suggests_scoped_and_near_names():
    ws = Workspace()
    ws.feed_blob("gpu_0/conv1", np.ones(1))
    ws.feed_blob("conv2_w", np.ones(1))
    with pytest.raises(BlobNotFoundError, match=r"'conv1' is not in the workspace.*gpu_0/conv1"):
        ws.fetch_blob("conv1")
    with pytest.raises(BlobNotFoundError, match=r"Did you mean: conv2_w"):
        ws.fetch_blob("conv2_W")


def test_run_operator_once():
    ws = Workspace()
    ws.feed_blob("x", np.array([-1.0, 2.0], np.float32))
    ws.run_operator_once(op_def("Relu", ["x"], ["y"]))
    np.testing.assert_array_equal(ws.fetch_blob("y"), [0.0, 2.0])


def test_create_and_run_net_num_iter():
    net = Net("acc")
    net.add_external_input("total", "one")
    net.Add(["total", "one"], "total")
    ws = Workspace()
    ws.feed_blob("total", np.zeros((), np.float32))
    ws.feed_blob("one", np.ones((), np.float32))
    assert ws.create_net(net) == "acc"
    ws.run_net("acc", num_iter=5)
    ws.run_net(net)
    assert ws.fetch_blob("total") == 6
    assert ws.nets() == ["acc"]
    with pytest.raises(SchemaError, match="already exists"):
        ws.create_net(net)
    ws.create_net(net, overwrite=True)


def test_run_net_unknown_name():
    with pytest.raises(SchemaError, match=r"net 'nope' has not been created.*create_net"):
        Workspace().run_net("nope")


def test_create_net_checks_schema_up_front():
    net = Net("bad")
    net.Relu("x", "y", alpha=2.0)
    with pytest.raises(SchemaError, match=r"op #0 Relu: unknown argument 'alpha'"):
        Workspace().create_net(net)
    net = Net("bad2")
    net.Gemm(["x"], "y")
    with pytest.raises(SchemaError, match=r"op #0 Gemm: got 1 inputs, expected 2 to 3"):
        Workspace().create_net(net)


def test_unknown_net_type():
    net = Net("n")
    net.set_type("quantum")
    with pytest.raises(SchemaError, match="unknown net type 'quantum'"):
        Workspace().create_net(net)


def test_missing_input_blob():
    net = Net("n")
    net.Relu("data", "y")
    ws = Workspace()
    ws.feed_blob("date", np.ones(2))
    with pytest.raises(BlobNotFoundError, match=r"op #0 Relu: input 'data' is not in.*date"):
        ws.run_net_once(net)


def test_operator_error_carries_context():
    net = Net("n")
    net.add_external_input("data", "w")
    net.Relu("data", "r")
    net.Conv(["r", "w"], "conv1", name="conv1", kernel_shape=[3, 3])
    ws = Workspace()
    ws.feed_blob("data", np.ones((1, 3, 8), np.float32))
    ws.feed_blob("w", np.ones((4, 3, 3, 3), np.float32))
    with pytest.raises(OperatorError) as info:
        ws.run_net_once(net)
    text = str(info.value)
    assert text.startswith("op #1 Conv 'conv1' failed on cpu:")
    assert "3 dims, expected 4" in text
    assert "r: float32[1, 3, 8], w: float32[4, 3, 3, 3]" in text
    assert "outputs: conv1" in text
    assert info.value.__cause__ is not None


def test_dtype_check_names_the_input():
    ws = Workspace()
    ws.feed_blob("x", np.ones((1, 1, 3, 3), np.int64))
    ws.feed_blob("w", np.ones((1, 1, 1, 1), np.float32))
    with pytest.raises(OperatorError, match=r"input 'X' has dtype int64, expected a float type"):
        ws.run_operator_once(op_def("Conv", ["x", "w"], ["y"]))


def test_twelve_op_net_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.normal(size=4).astype(np.float32)
    fc_w = rng.normal(size=(5, 4 * 4 * 4)).astype(np.float32) * 0.1
    fc_b = rng.normal(size=5).astype(np.float32)

    net = Net("twelve")
    net.add_external_input("x", "w", "b", "fc_w", "fc_b", "scale")
    conv = net.Conv(["x", "w", "b"], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    relu = conv.Relu([], "relu")
    pool = relu.MaxPool([], "pool", kernel_shape=[2, 2], strides=[2, 2])
    flat = pool.Flatten([], "flat", axis=1)
    fc = net.Gemm([flat, "fc_w", "fc_b"], "fc", transB=1)
    scaled = fc.Mul(["scale"], "scaled")
    tanh = scaled.Tanh([], "tanh")
    sig = fc.Sigmoid([], "sig")
    both = net.Sum([tanh, sig], "both")
    sm = both.Softmax([], "sm", axis=1)
    logp = sm.Log([], "logp")
    net.ReduceMean([logp], "loss", keepdims=0)
    net.add_external_output("loss", "sm")
    assert len(net.ops) == 12
    net.lint()

    ws = Workspace()
    for name, value in dict(x=x, w=w, b=b, fc_w=fc_w, fc_b=fc_b).items():
        ws.feed_blob(name, value)
    ws.feed_blob("scale", np.float32(0.5))
    ws.create_net(net)
    ws.run_net("twelve")

    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 4, 8, 8), np.float32)
    for i in range(8):
        for j in range(8):
            patch = padded[:, :, i : i + 3, j : j + 3]
            ref[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    ref = np.maximum(ref + b[None, :, None, None], 0)
    ref = ref.reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5)).reshape(2, -1)
    ref = ref @ fc_w.T + fc_b
    both_ref = np.tanh(ref * 0.5) + 1 / (1 + np.exp(-ref))
    e = np.exp(both_ref - both_ref.max(axis=1, keepdims=True))
    sm_ref = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ws.fetch_blob("sm"), sm_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("loss"), np.log(sm_ref).mean(), rtol=1e-5)
    assert ws.fetch_blob("loss").dtype == np.float32
