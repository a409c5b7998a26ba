"""Gradients of BatchNormalization, LayerNormalization and Dropout against central differences."""

import numpy as np
import pytest

from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


def bn_inputs(shape):
    c = shape[1] if len(shape) > 1 else 1
    x = rand(*shape, seed=1, low=-3, high=3)
    scale, b, mean = (rand(c, seed=s) for s in (2, 3, 4))
    return [x, scale, b, mean, rand(c, seed=5, low=0.5, high=2.0)]


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (3, 2, 2, 3), (6,)])
@pytest.mark.parametrize("training_mode", [0, 1])
def test_batch_normalization_gradient(shape, training_mode):
    # One output: the running statistics carry no gradient by design.
    check_gradient(
        "BatchNormalization",
        bn_inputs(shape),
        wrt=[0, 1, 2],
        training_mode=training_mode,
        epsilon=1e-3,
    )


def test_batch_normalization_gradient_ignores_running_stats():
    op = op_def("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "m", "v"], training_mode=1)
    (grad_op,) = GRADIENTS["BatchNormalization"](
        op, ["dy", "dm", "dv"], ["dx", "ds", None, "m_grad", "v_grad"]
    )
    assert grad_op.type == "BatchNormalizationGradient"
    # The statistics get no gradient, and in training are not read: they are usually
    # updated in place.
    assert list(grad_op.input) == ["x", "s", "dy", "", ""]
    assert list(grad_op.output) == ["dx", "ds", ""]
    x, s, _, _, _ = bn_inputs((4, 3, 2))
    dx, ds = run_op(
        grad_op.type, [x, s, rand(4, 3, 2, seed=9)], outputs=["dx", "ds", ""], training_mode=1
    )
    assert dx.dtype == ds.dtype == np.float32 and dx.shape == x.shape and ds.shape == (3,)


@pytest.mark.parametrize(
    "shape, axis, scale_shape",
    [((3, 4), -1, (4,)), ((2, 3, 4), 1, (3, 4)), ((2, 3, 4), -2, (1, 4)), ((5,), 0, (5,))],
)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization_gradient(shape, axis, scale_shape, with_bias):
    inputs = [rand(*shape, seed=1, low=-2, high=2), rand(*scale_shape, seed=2)]
    inputs += [rand(*scale_shape, seed=3)] if with_bias else []
    check_gradient("LayerNormalization", inputs, axis=axis, stash_type=11)


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization_gradient_through_stats(axis):
    inputs = [rand(2, 3, 4, seed=1, low=-2, high=2), rand(4, seed=2), rand(4, seed=3)]
    check_gradient("LayerNormalization", inputs, outputs=3, axis=axis, stash_type=11)


def test_layer_normalization_gradient_float32_stash():
    inputs = [rand(3, 5, seed=1, low=-2, high=2), rand(5, seed=2), rand(5, seed=3)]
    check_gradient("LayerNormalization", inputs, atol=1e-3, rtol=3e-2)


def test_layer_normalization_gradient_ops():
    op = op_def("LayerNormalization", ["x", "s", "b"], ["y"])
    ops = GRADIENTS["LayerNormalization"](op, ["dy"], ["dx", None, "db"])
    assert [o.type for o in ops] == ["LayerNormalizationGradient", "SumReduceLike"]
    assert list(ops[0].output) == ["dx", ""]


@pytest.mark.parametrize("ratio", [0.3, 0.5])
@pytest.mark.parametrize("shape", [(7,), (3, 4, 5)])
def test_dropout_gradient_training(ratio, shape):
    inputs = [rand(*shape, seed=1), np.array(ratio), np.array(True)]
    check_gradient("Dropout", inputs, wrt=0, outputs=2, seed=3)


@pytest.mark.parametrize("extra", [[], [np.array(0.4)], [np.array(0.4), np.array(False)]])
def test_dropout_gradient_inference(extra):
    check_gradient("Dropout", [rand(3, 4, seed=1), *extra], wrt=0, outputs=2)


def test_dropout_gradient_kernel():
    dy, mask = rand(2, 5), rand(2, 5, seed=1) > 0
    (dx,) = run_op("DropoutGradient", [dy, mask, np.float32(0.75), np.array(True)])
    np.testing.assert_allclose(dx, dy * mask * 4.0, rtol=1e-6)
    assert dx.dtype == np.float32
    (dx,) = run_op("DropoutGradient", [dy, mask, np.float32(0.75), np.array(False)])
    np.testing.assert_array_equal(dx, dy)


def test_dropout_gradient_needs_mask():
    op = op_def("Dropout", ["x", "r", "t"], ["y"])
    with pytest.raises(SchemaError, match="needs the mask output"):
        GRADIENTS["Dropout"](op, ["dy"], ["dx", None, None])
    op = op_def("Dropout", ["x"], ["y"])  # no training_mode input: inference, no mask needed
    assert [o.type for o in GRADIENTS["Dropout"](op, ["dy"], ["dx"])] == ["Identity"]


def test_gradient_only_through_statistics_is_refused():
    op = op_def("LayerNormalization", ["x", "s"], ["y", "mean"])
    with pytest.raises(SchemaError, match="only through its other outputs"):
        GRADIENTS["LayerNormalization"](op, [None, "dmean"], ["dx", None])


def test_autodiff_through_in_place_batch_norm_and_dropout():
    # Caffe2 style: running statistics updated in place, Dropout written in place.
    def build():
        net = Net("bn_dropout")
        net.add_op(
            "BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "m", "v"], training_mode=1
        )
        net.add_op("Dropout", ["y", "r", "t"], ["y", "mask"], seed=1)
        net.add_op("ReduceSum", ["y"], ["loss"], keepdims=0)
        return net

    x, s, b, m, v = (np.asarray(a, np.float64) for a in bn_inputs((4, 3, 2)))
    feeds = {"s": s, "b": b, "m": m, "v": v, "r": np.array(0.4), "t": np.array(True)}

    def loss(x_value, net=None):
        ws = Workspace()
        for name, value in {**feeds, "x": x_value}.items():
            ws.feed_blob(name, value)
        ws.run_net_once(net or build())
        return ws

    net = build()
    grads = add_gradient_ops(net, ["loss"], wrt=["x", "s"])
    dx = loss(x, net).fetch_blob(grads["x"])
    assert np.abs(dx).max() > 1e-3
    for i in (0, 7, 23):
        plus, minus = x.copy(), x.copy()
        plus.flat[i] += 1e-5
        minus.flat[i] -= 1e-5
        diff = loss(plus).fetch_blob("loss") - loss(minus).fetch_blob("loss")
        np.testing.assert_allclose(dx.flat[i], diff / 2e-5, rtol=1e-4, atol=1e-8)
