"""CUDA losses (losses.cu) against their NumPy kernels."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import check_device, rand

TOL = {
    np.float32: {"atol": 1e-5, "rtol": 1e-5},
    np.float16: {"atol": 2e-3, "rtol": 1e-2},
    np.float64: {"atol": 1e-12, "rtol": 1e-10},
}
LABEL_TYPES = [np.int32, np.int64]


def labels_for(n, d, dtype=np.int64, seed=3):
    return np.random.default_rng(seed).integers(0, d, size=n).astype(dtype)


def probs(n, d, dtype=np.float32):
    e = np.exp(rand(n, d) * 3)
    return (e / e.sum(axis=1, keepdims=True)).astype(dtype)


def run_device(op_type, inputs, outputs=1, **attrs):
    ws = Workspace()
    names = []
    for i, value in enumerate(inputs):
        names.append(f"in{i}")
        ws.feed_blob(f"in{i}", value, device="cuda:0")
    outs = [f"out{i}" for i in range(outputs)]
    ws.run_operator_once(op_def(op_type, names, outs, device="cuda:0", **attrs))
    return [ws.fetch_blob(o) for o in outs]


# -- LabelCrossEntropy ---------------------------------------------------------------------------


@pytest.mark.parametrize("n, d", [(0, 5), (1, 1), (7, 3), (3, 257), (300, 10)])
@pytest.mark.parametrize("label_type", LABEL_TYPES)
def test_label_cross_entropy(n, d, label_type):
    x = probs(n, d)
    if n > 2:
        x[1, :] = 0  # picked probability 0: the 1e-20 floor
    label = labels_for(n, d, label_type)
    check_device("LabelCrossEntropy", [x, label])
    check_device("LabelCrossEntropyGradient", [x, label, rand(n, seed=1)])


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_label_cross_entropy_dtypes(dtype):
    x, label = probs(9, 6, dtype), labels_for(9, 6)
    check_device("LabelCrossEntropy", [x, label], **TOL[dtype])
    check_device(
        "LabelCrossEntropyGradient", [x, label, rand(9, seed=1).astype(dtype)], **TOL[dtype]
    )


def test_label_cross_entropy_shapes():
    x = probs(1, 6)[0]  # [D]: one row
    check_device("LabelCrossEntropy", [x, np.array([4], np.int32)])
    x2 = probs(5, 6)
    label = labels_for(5, 6).reshape(5, 1)
    check_device("LabelCrossEntropy", [x2, label])
    check_device("LabelCrossEntropyGradient", [x2, label, rand(5, 1, seed=1)])
    check_device("LabelCrossEntropyGradient", [x2, label, np.array([2.0], np.float32)])


def test_label_errors_match_the_cpu():
    with pytest.raises(OperatorError, match=r"input 'label' holds 6, out of range for 6"):
        run_device("LabelCrossEntropy", [probs(3, 6), np.array([1, 6, 0], np.int64)])
    with pytest.raises(OperatorError, match=r"SoftmaxWithLoss: input 'labels' holds -1"):
        run_device("SoftmaxWithLoss", [rand(2, 4), np.array([-1, 0], np.int32)], outputs=2)
    with pytest.raises(OperatorError, match="Accuracy: input 'labels' holds 9"):
        run_device("Accuracy", [rand(2, 4), np.array([1, 9], np.int32)])


# -- SoftmaxWithLoss -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, axis", [((0, 4), 1), ((1, 1), 1), ((7, 3), 1), ((3, 257), 1), ((2, 3, 5), 1),
                    ((2, 3, 5), 2), ((2, 3, 5), -1), ((40, 1100), 1)],
)  # fmt: skip
@pytest.mark.parametrize("label_type", LABEL_TYPES)
@pytest.mark.parametrize("weighted", [False, True])
def test_softmax_with_loss(shape, axis, label_type, weighted):
    x = rand(*shape) * 4
    n = int(np.prod(shape[: axis % len(shape)]))
    d = int(np.prod(shape[axis % len(shape) :]))
    inputs = [x, labels_for(n, d, label_type)]
    if weighted:
        inputs.append(rand(n, seed=2, low=0, high=2))
    check_device("SoftmaxWithLoss", inputs, outputs=2, axis=axis, scale=0.5)


def test_softmax_with_loss_zero_weights():
    check_device("SoftmaxWithLoss", [rand(4, 5), labels_for(4, 5), np.zeros(4, np.float32)],
                 outputs=2)  # fmt: skip


@pytest.mark.parametrize("n, d", [(1, 1), (6, 7), (3, 257)])
def test_softmax_with_loss_label_prob(n, d):
    x = rand(n, d) * 4
    target = probs(n, d, np.float64).astype(np.float32)
    target[0, 0] = 0.0
    target[0] /= target[0].sum(dtype=np.float64) if target[0].sum() else 1
    if d == 1:
        target[:] = 1
    check_device("SoftmaxWithLoss", [x, target], outputs=2, label_prob=1)
    check_device("SoftmaxWithLoss", [x, target, rand(n, seed=2, low=0, high=2)], outputs=2,
                 label_prob=1, scale=2.0)  # fmt: skip


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_softmax_with_loss_dtypes(dtype):
    x = (rand(9, 17) * 4).astype(dtype)
    check_device("SoftmaxWithLoss", [x, labels_for(9, 17)], outputs=2, **TOL[dtype])
    w = rand(9, seed=2, low=0, high=2).astype(dtype)
    check_device("SoftmaxWithLoss", [x, labels_for(9, 17), w], outputs=2, **TOL[dtype])


def _swl_grad_inputs(shape, axis, weighted, d_softmax, dtype=np.float32, label_prob=False):
    x = (rand(*shape) * 4).astype(dtype)
    a = axis % len(shape)
    n, d = int(np.prod(shape[:a])), int(np.prod(shape[a:]))
    labels = probs(n, d, dtype) if label_prob else labels_for(n, d)
    softmax = np.zeros(shape, dtype)  # recomputed from X by the kernels
    d_loss = np.array(1.5, dtype)
    ins = [x, labels] + ([rand(n, seed=2, low=0, high=2).astype(dtype)] if weighted else [])
    ins += [softmax, d_loss]
    if d_softmax:
        if not weighted:
            ins.insert(2, None)
        ins.append(rand(*shape, seed=4).astype(dtype))
    return ins


@pytest.mark.parametrize("shape, axis", [((0, 4), 1), ((1, 1), 1), ((7, 3), 1), ((3, 257), 1),
                                         ((2, 3, 5), 2), ((40, 1100), 1)])  # fmt: skip
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("d_softmax", [False, True])
def test_softmax_with_loss_gradient(shape, axis, weighted, d_softmax):
    ins = _swl_grad_inputs(shape, axis, weighted, d_softmax)
    check_device("SoftmaxWithLossGradient", ins, axis=axis, scale=0.5)


def test_softmax_with_loss_gradient_variants():
    ins = _swl_grad_inputs((6, 7), 1, True, True, label_prob=True)
    check_device("SoftmaxWithLossGradient", ins, label_prob=1)
    ins = _swl_grad_inputs((6, 7), 1, False, True)
    ins[3] = None  # no d_loss: only the softmax output's gradient
    check_device("SoftmaxWithLossGradient", ins)
    ins = _swl_grad_inputs((6, 7), 1, True, False)
    ins[2] = np.zeros(6, np.float32)  # weights summing to 0
    check_device("SoftmaxWithLossGradient", ins)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_softmax_with_loss_gradient_dtypes(dtype):
    ins = _swl_grad_inputs((9, 17), 1, True, True, dtype)
    check_device("SoftmaxWithLossGradient", ins, **TOL[dtype])


# -- AveragedLoss ----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")
@pytest.mark.parametrize("shape", [(0,), (), (1,), (7,), (3, 257), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_averaged_loss(shape, dtype):
    x = rand(*shape).astype(dtype)
    check_device("AveragedLoss", [x], **TOL[dtype])
    check_device("AveragedLossGradient", [x, np.array(3.0, dtype)], **TOL[dtype])


# -- Accuracy --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, d", [(0, 3), (1, 1), (7, 3), (3, 257), (300, 10)])
@pytest.mark.parametrize("top_k", [1, 2, 5])
@pytest.mark.parametrize("label_type", LABEL_TYPES)
def test_accuracy(n, d, top_k, label_type):
    pred = np.round(rand(n, d) * 3)  # ties rank the lower class first
    check_device("Accuracy", [pred, labels_for(n, d, label_type)], top_k=top_k)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64])
def test_accuracy_dtypes(dtype):
    pred = (rand(50, 8) * 3).astype(dtype)
    check_device("Accuracy", [pred, labels_for(50, 8)], top_k=2)
