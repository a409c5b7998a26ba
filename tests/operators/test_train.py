"""Training ops against Caffe2's formulas written out in NumPy."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, GradientNotWritten, NoGradient
from netbrew.testing import check_gradient, check_op, rand, run_op


def counter(value):
    return np.array([value], np.int64)


@pytest.mark.parametrize("dtype", [np.int64, np.int32])  # Caffe2's tutorials fill int32
def test_iter_increments_in_place(dtype):
    ws = Workspace()
    ws.feed_blob("it", counter(0).astype(dtype))
    op = op_def("Iter", ["it"], ["it"])
    for _ in range(3):
        ws.run_operator_once(op)
    out = ws.fetch_blob("it")
    assert out.dtype == dtype and out.tolist() == [3]
    (lr,) = run_op("LearningRate", [out], base_lr=-0.1, policy="step", stepsize=2, gamma=0.5)
    np.testing.assert_allclose(lr, [-0.05])


def test_iter_errors():
    with pytest.raises(OperatorError, match="'iter' has dtype int16, expected int64 or int32"):
        run_op("Iter", [np.array([0], np.int16)])
    with pytest.raises(OperatorError, match="largest int32"):
        run_op("Iter", [np.array([np.iinfo(np.int32).max], np.int32)])
    with pytest.raises(OperatorError, match=r"'iter' has shape \[2\], expected one value"):
        run_op("Iter", [np.array([0, 1], np.int64)])
    with pytest.raises(OperatorError, match="largest int64"):
        run_op("Iter", [counter(np.iinfo(np.int64).max)])


LR_CASES = [
    ("fixed", {}, lambda it: 1.0),
    ("step", {"gamma": 0.5, "stepsize": 3}, lambda it: 0.5 ** math.floor(it / 3)),
    ("exp", {"gamma": 0.9}, lambda it: 0.9**it),
    ("inv", {"gamma": 0.1, "power": 0.75}, lambda it: (1 + 0.1 * it) ** -0.75),
]


@pytest.mark.parametrize("it", [0, 1, 5, 100])
@pytest.mark.parametrize("policy, args, multiplier", LR_CASES, ids=[c[0] for c in LR_CASES])
def test_learning_rate(policy, args, multiplier, it):
    base_lr = -0.1
    check_op(
        "LearningRate",
        [counter(it)],
        reference=lambda _: (np.array([base_lr * multiplier(it)], np.float32),),
        base_lr=base_lr,
        policy=policy,
        **args,
    )


def test_learning_rate_errors():
    with pytest.raises(OperatorError, match="unknown policy 'cosine'; known policies: fixed, step"):
        run_op("LearningRate", [counter(0)], base_lr=0.1, policy="cosine")
    with pytest.raises(OperatorError, match="policy 'step' needs argument 'stepsize'"):
        run_op("LearningRate", [counter(0)], base_lr=0.1, policy="step", gamma=0.1)
    with pytest.raises(OperatorError, match="'stepsize' is 0, expected > 0"):
        run_op("LearningRate", [counter(0)], base_lr=0.1, policy="step", gamma=0.1, stepsize=0)
    with pytest.raises(Exception, match="required argument 'base_lr' is missing"):
        run_op("LearningRate", [counter(0)], policy="fixed")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pairs, shape", [(1, (3,)), (2, (2, 3)), (4, (5,))])
def test_weighted_sum(pairs, shape, dtype):
    xs = [rand(*shape, seed=i, dtype=dtype) for i in range(pairs)]
    ws = [np.array([0.5 + i], np.float32) for i in range(pairs)]
    inputs = [v for pair in zip(xs, ws) for v in pair]

    def reference(*args):
        return (sum(float(w[0]) * x.astype(np.float64) for x, w in zip(xs, ws)).astype(dtype),)

    check_op("WeightedSum", inputs, reference=reference)


def test_weighted_sum_errors():
    with pytest.raises(OperatorError, match="got 3 inputs, expected pairs"):
        run_op("WeightedSum", [rand(2), rand(1), rand(2)])
    with pytest.raises(OperatorError, match=r"'X1' has shape \[3\], expected \[2\] like 'X0'"):
        run_op("WeightedSum", [rand(2), rand(1), rand(3), rand(1)])
    with pytest.raises(OperatorError, match="'weight1' has shape .* expected one value"):
        run_op("WeightedSum", [rand(2), rand(1), rand(2), rand(2)])


def momentum_sgd64(grad, moment, lr, param, momentum, nesterov):
    m_new = momentum * moment + lr[0] * grad
    step = (1 + momentum) * m_new - momentum * moment if nesterov else m_new
    return step, m_new, param - step


@pytest.mark.parametrize("nesterov", [0, 1])
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_momentum_sgd_update(shape, momentum, nesterov):
    grad, moment, param = (rand(*shape, seed=s) for s in range(3))
    lr = np.array([0.05], np.float32)
    check_op(
        "MomentumSGDUpdate",
        [grad, moment, lr, param],
        reference=lambda *a: [
            o.astype(np.float32)
            for o in momentum_sgd64(*(v.astype(np.float64) for v in a), momentum, nesterov)
        ],
        momentum=momentum,
        nesterov=nesterov,
    )


def test_momentum_sgd_update_in_place():
    ws = Workspace()
    for name, seed in (("g", 0), ("m", 1), ("w", 2)):
        ws.feed_blob(name, rand(3, seed=seed))
    ws.feed_blob("lr", np.array([0.1], np.float32))
    expected = momentum_sgd64(rand(3, seed=0), rand(3, seed=1), [0.1], rand(3, seed=2), 0.9, 0)
    ws.run_operator_once(op_def("MomentumSGDUpdate", ["g", "m", "lr", "w"], ["g", "m", "w"]))
    for name, value in zip("gmw", expected):
        np.testing.assert_allclose(ws.fetch_blob(name), value, rtol=1e-6)


def adam_reference(param, m1, m2, grads, lr, start, beta1, beta2, eps):
    """Caffe2's Adam, one step per gradient, in float64."""
    param, m1, m2 = (v.astype(np.float64) for v in (param, m1, m2))
    for k, g in enumerate(grads):
        t = start + k + 1
        correction = np.sqrt(1 - beta2**t) / (1 - beta1**t)
        m1 = beta1 * m1 + (1 - beta1) * g
        m2 = beta2 * m2 + (1 - beta2) * g * g
        param = param + lr * correction * m1 / (np.sqrt(m2) + eps)
    return param, m1, m2


@pytest.mark.parametrize("attrs", [{}, {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-8}])
@pytest.mark.parametrize("start", [0, 10])
def test_adam_steps(start, attrs):
    beta1, beta2 = attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)
    eps = attrs.get("epsilon", 1e-5)  # Caffe2's default
    ws = Workspace()
    param, grads = rand(2, 3, seed=0), [rand(2, 3, seed=s) for s in range(1, 5)]
    ws.feed_blob("w", param)
    ws.feed_blob("m1", np.zeros_like(param))
    ws.feed_blob("m2", np.zeros_like(param))
    ws.feed_blob("lr", np.array([-0.01], np.float32))
    ws.feed_blob("it", counter(start))
    adam = op_def("Adam", ["w", "m1", "m2", "g", "lr", "it"], ["w", "m1", "m2"], **attrs)
    for g in grads:
        ws.feed_blob("g", g)
        ws.run_operator_once(adam)
        ws.run_operator_once(op_def("Iter", ["it"], ["it"]))
    zeros = np.zeros_like(param)
    expected = adam_reference(param, zeros, zeros, grads, -0.01, start, beta1, beta2, eps)
    for name, value in zip(["w", "m1", "m2"], expected):
        got = ws.fetch_blob(name)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_optimizer_errors():
    with pytest.raises(OperatorError, match=r"'moment' has shape \[3\], expected \[2\]"):
        run_op("MomentumSGDUpdate", [rand(2), rand(3), rand(1), rand(2)], outputs=3)
    with pytest.raises(OperatorError, match=r"'lr' has shape \[2\], expected one value"):
        run_op("Adam", [rand(2), rand(2), rand(2), rand(2), rand(2), counter(0)], outputs=3)


def test_stop_gradient():
    x = rand(2, 3)
    check_op("StopGradient", [x], reference=lambda x: (x,))


@pytest.mark.parametrize("op_type", ["Iter", "LearningRate", "StopGradient"])
def test_counter_ops_and_stop_gradient_have_no_gradient(op_type):
    assert isinstance(GRADIENTS[op_type], NoGradient)


@pytest.mark.parametrize("op_type", ["MomentumSGDUpdate", "Adam"])
def test_optimizer_updates_are_marked_gradient_not_written(op_type):
    marker = GRADIENTS[op_type]
    assert isinstance(marker, GradientNotWritten)
    assert marker.reason == (
        "an optimizer update: differentiating through a training step is not supported"
    )


def test_autodiff_refuses_a_path_through_an_optimizer_update():
    net = Net("unrolled")
    net.Mul(["x", "w"], "g")
    net.MomentumSGDUpdate(["g", "m", "lr", "p"], ["g_step", "m_out", "p_out"])
    net.ReduceSum(["p_out"], "loss", keepdims=0)
    with pytest.raises(SchemaError, match=r"op #1 MomentumSGDUpdate \(an optimizer update: "):
        add_gradient_ops(net, ["loss"], wrt=["w"])


def weighted_sum_inputs(pairs, shape, weight_shape=(1,)):
    xs = [rand(*shape, seed=2 * i) for i in range(pairs)]
    ws = [rand(*weight_shape, seed=2 * i + 1) for i in range(pairs)]
    return [v for pair in zip(xs, ws) for v in pair]


@pytest.mark.parametrize("weight_shape", [(1,), (), (1, 1)])
@pytest.mark.parametrize("shape", [(3,), (2, 3), ()])
@pytest.mark.parametrize("pairs", [1, 2, 3])
def test_weighted_sum_gradient(pairs, shape, weight_shape):
    check_gradient("WeightedSum", weighted_sum_inputs(pairs, shape, weight_shape))


def test_weighted_sum_gradient_values():
    x0, x1 = np.array([1.0, 2.0, 3.0], np.float32), np.array([-1.0, 0.5, 4.0], np.float32)
    w0, w1 = np.array([2.0], np.float32), np.array([[-0.5]], np.float32)
    dy = np.array([1.0, -1.0, 2.0], np.float32)
    fwd = op_def("WeightedSum", ["x0", "w0", "x1", "w1"], ["y"])
    ws = Workspace()
    for name, value in {"x0": x0, "w0": w0, "x1": x1, "w1": w1, "dy": dy}.items():
        ws.feed_blob(name, value)
    for grad_op in GRADIENTS["WeightedSum"](fwd, ["dy"], ["dx0", "dw0", "dx1", "dw1"]):
        ws.run_operator_once(grad_op)
    got = {name: ws.fetch_blob(name) for name in ("dx0", "dw0", "dx1", "dw1")}
    np.testing.assert_array_equal(got["dx0"], [2.0, -2.0, 4.0])
    np.testing.assert_array_equal(got["dx1"], [-0.5, 0.5, -1.0])
    np.testing.assert_array_equal(got["dw0"], [5.0])  # 1 - 2 + 6
    np.testing.assert_array_equal(got["dw1"], [[6.5]])  # -1 - 0.5 + 8, in w1's shape
    assert all(v.dtype == np.float32 for v in got.values())


def test_weighted_sum_maker_reads_x_only_for_a_weight_gradient():
    fwd = op_def("WeightedSum", ["x0", "w0", "x1", "w1"], ["y"])
    ops = GRADIENTS["WeightedSum"](fwd, ["dy"], ["dx0", None, None, "dw1"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [
        ("WeightedSumGradient", ["dy", "w0"], ["dx0", ""]),
        ("WeightedSumGradient", ["dy", "w1", "x1"], ["", "dw1"]),
    ]
    with pytest.raises(SchemaError, match="WeightedSum: got 3 inputs, expected pairs"):
        GRADIENTS["WeightedSum"](op_def("WeightedSum", ["x0", "w0", "x1"], ["y"]), ["dy"], [None])


def weighted_sum_in_place_net():
    """x = w0 * x + w1 * g, in place as Caffe2's SGD writes it, then loss = sum(x)."""
    net = Net("in_place")
    net.WeightedSum(["x", "w0", "g", "w1"], ["x"])
    net.ReduceSum(["x"], "loss", keepdims=0)
    return net


def test_weighted_sum_in_place_refuses_the_gradient_of_weight0():
    # dw0 = sum(X0 * dY) reads X0, which the op has overwritten by the time the backward runs
    with pytest.raises(SchemaError) as info:
        add_gradient_ops(weighted_sum_in_place_net(), ["loss"], wrt=["w0"])
    assert str(info.value) == (
        "op #0 WeightedSum: its gradient needs input 'x', which the op overwrites in place; "
        "write the output to another blob"
    )


def test_weighted_sum_in_place_still_gives_the_gradients_that_skip_x0():
    net = weighted_sum_in_place_net()
    grads = add_gradient_ops(net, ["loss"], wrt=["x", "g", "w1"])
    x, g = rand(2, 3), rand(2, 3, seed=1)
    w0, w1 = np.array([0.5], np.float32), np.array([-2.0], np.float32)
    ws = Workspace()
    for name, value in {"x": x, "g": g, "w0": w0, "w1": w1}.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob(grads["x"]), np.full((2, 3), 0.5, np.float32))
    np.testing.assert_array_equal(ws.fetch_blob(grads["g"]), np.full((2, 3), -2.0, np.float32))
    np.testing.assert_allclose(ws.fetch_blob(grads["w1"]), [g.sum()], rtol=1e-6)


def test_weighted_sum_gradient_errors():
    with pytest.raises(OperatorError, match="output 'dweight' needs input 'X', which is not given"):
        run_op("WeightedSumGradient", [rand(3), rand(1)], outputs=["", "dw"])
    with pytest.raises(OperatorError, match=r"input 'X' has shape \[2\], expected \[3\]"):
        run_op("WeightedSumGradient", [rand(3), rand(1), rand(2)], outputs=2)
    with pytest.raises(OperatorError, match=r"input 'weight' has shape \[2\], expected one"):
        run_op("WeightedSumGradient", [rand(3), rand(2)], outputs=["dx", ""])


def test_stop_gradient_cuts_the_backward_pass():
    from netbrew.netdef.autodiff import add_gradient_ops
    from netbrew.proto.netbrew_pb2 import NetDef

    net = NetDef(op=[op_def("StopGradient", ["x"], ["y"]), op_def("AveragedLoss", ["y"], ["loss"])])
    grads = add_gradient_ops(net, ["loss"])
    assert "y" in grads and "x" not in grads
