"""autodiff: backward nets built from the gradient registry, checked against NumPy."""

import numpy as np
import pytest

from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import Net
from netbrew.netdef.autodiff import add_gradient_ops


def run(net, **feeds):
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    return ws


def test_fan_out_gradients_are_summed():
    # y = x * w + x ; loss = mean(y)  => dloss/dx = (w + 1) / n
    net = Net("fan")
    net.Mul(["x", "w"], "xw")
    net.Add(["xw", "x"], "y")
    net.ReduceMean(["y"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.full((2, 3), 3.0, np.float32)
    ws = run(net, x=x, w=w)
    np.testing.assert_allclose(ws.fetch_blob(grads["x"]), (w + 1) / 6, rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob(grads["w"]), x / 6, rtol=1e-6)
    assert grads["x"] == "x_grad"
    assert any(op.type == "Sum" and op.output[0] == "x_grad" for op in net.ops)
    assert all(op.is_gradient_op for op in net.ops[3:])


def test_broadcast_gradient_is_reduced_to_input_shape():
    net = Net("bias")
    net.Add(["x", "b"], "y")
    net.ReduceSum(["y"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=["b"])
    ws = run(net, x=np.ones((4, 3), np.float32), b=np.zeros(3, np.float32))
    np.testing.assert_array_equal(ws.fetch_blob(grads["b"]), [4.0, 4.0, 4.0])
    assert "x" not in grads  # not asked for and not on the path from wrt


def test_mlp_gradients_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4)).astype(np.float32)
    w = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=3).astype(np.float32)
    net = Net("mlp")
    net.FC(["x", "w", "b"], "h")
    net.Relu("h", "r")
    net.ReduceSum(["r"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=["w", "b"])
    ws = run(net, x=x, w=w, b=b)
    mask = (x @ w.T + b > 0).astype(np.float32)
    np.testing.assert_allclose(ws.fetch_blob(grads["w"]), mask.T @ x, rtol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(grads["b"]), mask.sum(0), rtol=1e-5)


def test_in_place_relu_is_versioned():
    net = Net("inplace")
    net.Mul(["x", "w"], "h")
    net.Relu("h", "h")
    net.ReduceSum(["h"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=["w"])
    x = np.array([1.0, -2.0, 3.0], np.float32)
    ws = run(net, x=x, w=np.ones(3, np.float32))
    np.testing.assert_array_equal(ws.fetch_blob(grads["w"]), [1.0, 0.0, 3.0])


def test_in_place_write_of_an_input_the_gradient_needs_is_refused():
    net = Net("bad")
    net.Mul(["x", "w"], "x")  # Mul's gradient needs x, now overwritten
    net.ReduceSum(["x"], "loss", keepdims=0)
    with pytest.raises(SchemaError, match=r"op #0 Mul: its gradient needs input 'x'"):
        add_gradient_ops(net, ["loss"], wrt=["w"])


@pytest.fixture
def ops_without_gradient(monkeypatch):
    """Two throwaway op types with kernels but no gradient, removed after the test."""
    from netbrew.operators import KERNELS, SCHEMAS
    from netbrew.operators.schema import OpSchema

    template = SCHEMAS["Identity"]
    for name in ("NoGradA", "NoGradB"):
        fields = {**template.__dict__, "name": name}
        monkeypatch.setitem(SCHEMAS._items, name, OpSchema(**fields))
        monkeypatch.setitem(KERNELS._items, (name, "cpu"), lambda x: (x,))


def test_every_op_without_gradient_is_listed_once(ops_without_gradient):
    net = Net("missing")
    net.NoGradA("x", "a")
    net.NoGradB("a", "b")
    net.NoGradA("b", "c")
    net.ReduceSum(["c"], "loss", keepdims=0)
    with pytest.raises(SchemaError) as info:
        add_gradient_ops(net, ["loss"], wrt=["x"])
    text = str(info.value)
    assert "3 op(s) on the path to the loss have no gradient" in text
    assert "op #2 NoGradA, op #1 NoGradB, op #0 NoGradA" in text
    assert "StopGradient" in text


def test_stop_gradient_cuts_the_path():
    net = Net("stop")
    net.Mul(["x", "w"], "h")
    net.StopGradient("h", "h_const")
    net.Mul(["h_const", "v"], "y")
    net.ReduceSum(["y"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"])
    assert "v" in grads and "w" not in grads and "x" not in grads


def test_gradient_not_written_is_an_error_that_names_the_op_and_why(
    ops_without_gradient, monkeypatch
):
    from netbrew.operators import GRADIENTS, gradient_not_written

    monkeypatch.setattr(GRADIENTS, "_items", dict(GRADIENTS._items))  # undone after the test
    gradient_not_written("NoGradA", "a throwaway op's reason")
    net = Net("unwritten")
    net.Mul(["x", "w"], "xw")
    net.NoGradA("xw", "y")
    net.ReduceSum(["y"], "loss", keepdims=0)
    with pytest.raises(SchemaError) as info:
        add_gradient_ops(net, ["loss"], wrt=["w"])
    text = str(info.value)
    assert "1 op(s) on the path to the loss have no gradient: op #1 NoGradA" in text
    assert "a throwaway op's reason" in text


def test_an_op_with_no_gradient_in_math_stops_the_walk_quietly():
    # y = Reshape(x * w, Shape(z)): Shape passes no gradient to z, and that is not an error.
    net = Net("shape")
    net.Mul(["x", "w"], "xw")
    net.Shape("z", "s")
    net.Reshape(["xw", "s"], "y")
    net.ReduceSum(["y"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"])
    assert "w" in grads and "z" not in grads
