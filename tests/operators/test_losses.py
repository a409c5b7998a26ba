"""Losses against NumPy written out in float64, and their gradients by central differences."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, check_op, rand, run_op


def labels_for(n, d, seed=1, dtype=np.int64, shape=None):
    rng = np.random.default_rng(seed)
    return rng.integers(0, d, size=shape or (n,)).astype(dtype)


def probabilities(n, d, seed=0):
    x = rand(n, d, seed=seed, low=0.1, high=1.0)
    return x / x.sum(axis=1, keepdims=True)


def log_softmax64(x, axis):
    s = x.astype(np.float64) - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


# LabelCrossEntropy


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("n, d", [(1, 2), (4, 5), (7, 3)])
def test_label_cross_entropy(n, d, label_dtype):
    x, label = probabilities(n, d), labels_for(n, d, dtype=label_dtype)
    x[0, label[0]] = 0  # clamped to 1e-20, not -log(0)

    def reference(x, label):
        picked = x.astype(np.float64)[np.arange(n), label]
        return (-np.log(np.maximum(picked, 1e-20)).astype(np.float32),)

    check_op("LabelCrossEntropy", [x, label], reference=reference)


def test_label_cross_entropy_errors():
    with pytest.raises(OperatorError, match="'label' holds 5, out of range for 5 classes"):
        run_op("LabelCrossEntropy", [probabilities(2, 5), np.array([0, 5])])
    with pytest.raises(OperatorError, match=r"'label' has shape \[3\], expected \[2\]"):
        run_op("LabelCrossEntropy", [probabilities(2, 5), np.array([0, 1, 2])])


# SoftmaxWithLoss


def softmax_with_loss64(x, labels, weights=None, *, scale=1.0, label_prob=0, axis=1):
    n = int(np.prod(x.shape[:axis]))
    log_p = log_softmax64(x.reshape(n, -1), 1)
    if label_prob:
        per_row = -(labels.reshape(n, -1) * log_p).sum(axis=1)
    else:
        per_row = -log_p[np.arange(n), labels.reshape(-1)]
    w = np.ones(n) if weights is None else weights.astype(np.float64)
    loss = scale * (w * per_row).sum() / w.sum()
    return np.exp(log_p).reshape(x.shape).astype(x.dtype), np.asarray(loss, x.dtype)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(
    "shape, axis, label_prob, scale",
    [((4, 5), 1, 0, 1.0), ((3, 6), 1, 1, 1.0), ((2, 3, 4), 1, 0, 0.5), ((2, 3, 4), 2, 0, 2.0)],
)
def test_softmax_with_loss(shape, axis, label_prob, scale, weighted):
    x = rand(*shape) * 30  # large logits must not overflow
    n = int(np.prod(shape[:axis]))
    d = int(np.prod(shape[axis:]))
    labels = probabilities(n, d) if label_prob else labels_for(n, d, dtype=np.int32)
    weights = rand(n, seed=2, low=0.5, high=2.0) if weighted else None
    check_op(
        "SoftmaxWithLoss",
        [x, labels, weights],
        outputs=2,
        reference=lambda *a: softmax_with_loss64(
            x, labels, weights, scale=scale, label_prob=label_prob, axis=axis
        ),
        scale=scale,
        label_prob=label_prob,
        axis=axis,
    )


def test_softmax_with_loss_zero_weights_give_zero_loss():
    _, loss = run_op(
        "SoftmaxWithLoss", [rand(2, 3), np.array([0, 1]), np.zeros(2, np.float32)], outputs=2
    )
    assert loss.shape == () and loss == 0


def test_softmax_with_loss_errors():
    with pytest.raises(OperatorError, match=r"'labels' must be int \[2\]"):
        run_op("SoftmaxWithLoss", [rand(2, 3), probabilities(2, 3)], outputs=2)
    with pytest.raises(OperatorError, match="each row of 'labels' must be >= 0 and sum to 1"):
        run_op("SoftmaxWithLoss", [rand(2, 3), rand(2, 3)], outputs=2, label_prob=1)
    with pytest.raises(OperatorError, match="'weights' has 3 values, expected 2"):
        run_op("SoftmaxWithLoss", [rand(2, 3), np.array([0, 1]), rand(3)], outputs=2)
    with pytest.raises(OperatorError, match="'axis' is 2, out of range"):
        run_op("SoftmaxWithLoss", [rand(2, 3), np.array([0, 1])], outputs=2, axis=2)


# SoftmaxCrossEntropyLoss


def onnx_reference(scores, labels, weights, n_out, **attrs):
    """The same node run by onnx's reference evaluator."""
    names = ["scores", "labels"] + (["weights"] if weights is not None else [])
    outs = ["loss", "log_prob"][:n_out]
    node = helper.make_node("SoftmaxCrossEntropyLoss", names, outs, **attrs)
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, elem(v.dtype), v.shape)
            for n, v in zip(names, [scores, labels, weights])
        ],
        [helper.make_tensor_value_info(n, elem(scores.dtype), None) for n in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = dict(zip(names, [scores, labels, weights]))
    return ReferenceEvaluator(model).run(None, feeds)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1, -1])
@pytest.mark.parametrize("shape", [(4, 3), (2, 5, 3), (2, 3, 2, 2)])
def test_softmax_cross_entropy_loss(shape, ignore_index, weighted, reduction):
    scores = rand(*shape) * 10
    labels = labels_for(0, shape[1], shape=shape[:1] + shape[2:])
    if ignore_index == -1:
        labels.flat[0] = -1
    weights = rand(shape[1], seed=3, low=0.5, high=2.0) if weighted else None
    attrs = {"reduction": reduction}
    if ignore_index is not None:
        attrs["ignore_index"] = ignore_index
    expected = onnx_reference(scores, labels, weights, 2, **attrs)
    check_op(
        "SoftmaxCrossEntropyLoss",
        [scores, labels, weights],
        outputs=2,
        reference=lambda *a: expected,
        **attrs,
    )
    assert onnx.defs.has("SoftmaxCrossEntropyLoss")


def test_softmax_cross_entropy_loss_errors():
    with pytest.raises(OperatorError, match="'labels' holds 3, out of range for 3 classes"):
        run_op("SoftmaxCrossEntropyLoss", [rand(2, 3), np.array([0, 3])])
    with pytest.raises(OperatorError, match=r"'labels' has shape \[2, 1\], expected \[2\]"):
        run_op("SoftmaxCrossEntropyLoss", [rand(2, 3), np.array([[0], [1]])])
    with pytest.raises(OperatorError, match="'reduction' is 'avg', expected 'mean'"):
        run_op("SoftmaxCrossEntropyLoss", [rand(2, 3), np.array([0, 1])], reduction="avg")
    with pytest.raises(OperatorError, match=r"'weights' has shape \[2\], expected \[3\]"):
        run_op("SoftmaxCrossEntropyLoss", [rand(2, 3), np.array([0, 1]), rand(2)])


# AveragedLoss


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1,), (5,), (3, 4)])
def test_averaged_loss(shape, dtype):
    x = rand(*shape, dtype=dtype)
    check_op(
        "AveragedLoss", [x], reference=lambda x: (np.asarray(x.mean(dtype=np.float64), dtype),)
    )


# Gradients


@pytest.mark.parametrize("n, d", [(1, 3), (4, 5)])
def test_label_cross_entropy_gradient(n, d):
    check_gradient("LabelCrossEntropy", [probabilities(n, d), labels_for(n, d)], wrt=0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("grad_outputs", [[1], [0, 1]])  # loss alone, or also the softmax
@pytest.mark.parametrize(
    "shape, axis, label_prob, scale",
    [((4, 5), 1, 0, 1.0), ((3, 4), 1, 1, 2.0), ((2, 3, 2), 1, 0, 0.5), ((2, 3, 2), 2, 1, 1.0)],
)
def test_softmax_with_loss_gradient(shape, axis, label_prob, scale, grad_outputs, weighted):
    n = int(np.prod(shape[:axis]))
    d = int(np.prod(shape[axis:]))
    labels = probabilities(n, d).reshape(shape) if label_prob else labels_for(n, d)
    weights = rand(n, seed=2, low=0.5, high=2.0) if weighted else None
    check_gradient(
        "SoftmaxWithLoss",
        [rand(*shape) * 3, labels, weights],
        wrt=0,
        outputs=2,
        grad_outputs=grad_outputs,
        scale=scale,
        label_prob=label_prob,
        axis=axis,
    )


@pytest.mark.parametrize("grad_outputs", [[0], [0, 1], [1]])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "shape, weighted, ignore_index",
    [((4, 3), False, None), ((2, 4, 3), True, None), ((2, 3, 2, 2), True, 2), ((3, 4), False, 0)],
)
def test_softmax_cross_entropy_loss_gradient(
    shape, weighted, ignore_index, reduction, grad_outputs
):
    labels = labels_for(0, shape[1], shape=shape[:1] + shape[2:])
    weights = rand(shape[1], seed=3, low=0.5, high=2.0) if weighted else None
    check_gradient(
        "SoftmaxCrossEntropyLoss",
        [rand(*shape) * 3, labels, weights],
        wrt=0,
        outputs=2,
        grad_outputs=grad_outputs,
        reduction=reduction,
        ignore_index=ignore_index,
    )


@pytest.mark.parametrize("shape", [(1,), (3, 4), (2, 3, 2)])
def test_averaged_loss_gradient(shape):
    check_gradient("AveragedLoss", [rand(*shape)])


@pytest.mark.parametrize(
    "op_type, inputs, outputs, grad_type",
    [
        ("LabelCrossEntropy", ["x", "label"], ["y"], "LabelCrossEntropyGradient"),
        ("SoftmaxWithLoss", ["x", "label"], ["p", "loss"], "SoftmaxWithLossGradient"),
        ("SoftmaxCrossEntropyLoss", ["x", "label"], ["loss"], "SoftmaxCrossEntropyLossGradient"),
        ("AveragedLoss", ["x"], ["y"], "AveragedLossGradient"),
    ],
)
def test_makers_emit_gradient_ops(op_type, inputs, outputs, grad_type):
    g_out = [f"{o}_grad" for o in outputs]
    g_in = ["x_grad"] + [None] * (len(inputs) - 1)
    ops = GRADIENTS[op_type](op_def(op_type, inputs, outputs), g_out, g_in)
    assert [op.type for op in ops] == [grad_type]
    assert list(ops[0].output) == ["x_grad"]


def test_softmax_with_loss_gradient_keeps_caffe2_layout():
    op = op_def("SoftmaxWithLoss", ["x", "label"], ["p", "loss"], scale=2.0)
    (grad,) = GRADIENTS["SoftmaxWithLoss"](op, [None, "loss_grad"], ["x_grad", None])
    assert list(grad.input) == ["x", "label", "", "p", "loss_grad"]
    x, label = rand(3, 4), labels_for(3, 4)
    p, _ = run_op("SoftmaxWithLoss", [x, label], outputs=2)
    (caffe2_style,) = run_op(
        "SoftmaxWithLossGradient", [x, label, p, np.array(1, np.float32)], scale=2.0
    )
    target = np.eye(4, dtype=np.float32)[label]
    np.testing.assert_allclose(caffe2_style, 2.0 * (p - target) / 3, rtol=1e-5, atol=1e-6)
