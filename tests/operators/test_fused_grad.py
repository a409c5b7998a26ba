"""Gradients of the fused inference ops (ConvRelu, GemmRelu, FCRelu, ConvWinograd,
ConvWinogradRelu, ConvShuffle) and of Summarize, by central differences,
and a CNN optimized by the inference passes differentiated to the unoptimized net's
parameter gradients."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.args import args_dict
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.passes import (
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    fuse_elementwise,
    rewrite_for_inference,
)
from netbrew.operators import GRADIENTS
from netbrew.operators import conv_winograd as cw
from netbrew.operators.conv_hwc import hwc_weights
from netbrew.operators.conv_winograd4 import winograd4_weights
from netbrew.testing import check_gradient, rand, run_op

EPS = 1e-6
"""Central-difference step: small enough that no output crosses a Relu kink or a Clip bound
(the inputs stay further than that from them), float64 keeps the quotient accurate."""


def run_gradient(op, inputs, dy, wanted):
    """Runs `op`'s gradient ops on `inputs` (fed as in0, in1, ...) and dY; returns the
    gradients of the inputs in `wanted`, and the gradient ops."""
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    forward = op_def(op.type, names, ["out0"], **args_dict(op.arg))
    ws = Workspace()
    for name, x in zip(names, inputs):
        if name:
            ws.feed_blob(name, x)
    ws.run_operator_once(forward)
    ws.feed_blob("out0_grad", dy)
    g_in = [f"in{i}_grad" if i in wanted else None for i in range(len(inputs))]
    grad_ops = GRADIENTS[op.type](forward, ["out0_grad"], g_in)
    for grad_op in grad_ops:
        ws.run_operator_once(grad_op)
    return [ws.fetch_blob(g_in[i]) for i in wanted], grad_ops


# ConvRelu, GemmRelu, FCRelu

CONV_CASES = [  # (X shape, W shape, with bias, attrs)
    ((2, 3, 6, 6), (4, 3, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    ((1, 4, 7, 6), (6, 2, 3, 3), True, {"group": 2, "strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ((1, 2, 7, 7), (3, 2, 3, 2), False, {"dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((2, 4, 9), (4, 1, 3), True, {"group": 4, "pads": [1, 1]}),  # 1-D depthwise
    ((1, 2, 4, 4, 4), (3, 2, 2, 2, 2), True, {"strides": [1, 2, 1]}),  # 3-D
]


@pytest.mark.parametrize("x_shape, w_shape, bias, attrs", CONV_CASES)
def test_conv_relu_gradient(x_shape, w_shape, bias, attrs):
    x, w = rand(*x_shape, seed=1), rand(*w_shape, seed=2)
    inputs = [x, w] + ([rand(w_shape[0], seed=3)] if bias else [])
    (y,) = run_op("Conv", inputs, **attrs)
    assert (y < 0).any() and (y > 0).any()  # the Relu masks some of the gradient
    check_gradient("ConvRelu", inputs, eps=EPS, max_points=30, **attrs)


GEMM_CASES = [  # (A shape, B shape, C shape or None, attrs)
    ((3, 5), (5, 4), (4,), {}),
    ((5, 3), (4, 5), (3, 4), {"transA": 1, "transB": 1, "alpha": 0.5, "beta": -2.0}),
    ((3, 5), (4, 5), (1, 4), {"transB": 1, "beta": 0.25}),
    ((3, 5), (5, 4), None, {"alpha": 2.0}),
    ((5, 3), (5, 4), (3, 1), {"transA": 1}),
]


@pytest.mark.parametrize("a_shape, b_shape, c_shape, attrs", GEMM_CASES)
def test_gemm_relu_gradient(a_shape, b_shape, c_shape, attrs):
    inputs = [rand(*a_shape, seed=4), rand(*b_shape, seed=5)]
    if c_shape is not None:
        inputs.append(rand(*c_shape, seed=6))
    (y,) = run_op("Gemm", inputs, **attrs)
    assert (y < 0).any() and (y > 0).any()
    check_gradient("GemmRelu", inputs, eps=EPS, **attrs)


FC_CASES = [  # (X shape, W shape, attrs)
    ((4, 6), (5, 6), {}),
    ((2, 3, 2, 2), (5, 12), {}),
    ((2, 3, 4), (5, 4), {"axis": 2}),
    ((3, 4), (5, 2, 2), {"axis_w": 1}),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", FC_CASES)
def test_fc_relu_gradient(x_shape, w_shape, attrs):
    inputs = [rand(*x_shape, seed=7), rand(*w_shape, seed=8), rand(w_shape[0], seed=9)]
    (y,) = run_op("FC", inputs, **attrs)
    assert (y < 0).any() and (y > 0).any()
    check_gradient("FCRelu", inputs, eps=EPS, **attrs)


@pytest.mark.parametrize("fused, base", [("ConvRelu", "Conv"), ("GemmRelu", "Gemm")])
def test_relu_fused_gradient_is_relus_then_the_base_ops(fused, base):
    """The same gradient ops as for the base op then its Relu: ReluGradient reads Y."""
    op = op_def(fused, ["x", "w", "b"], ["y"], name="f")
    ops = GRADIENTS[fused](op, ["y_grad"], ["x_grad", "w_grad", None])
    assert [o.type for o in ops] == ["ReluGradient", f"{base}Gradient"]
    assert list(ops[0].input) == ["y", "y_grad"]
    assert ops[1].input[2] == ops[0].output[0]  # the base op's dY is Relu's dX
    assert list(ops[1].output)[:2] == ["x_grad", "w_grad"]


# FusedConv

FUSED_CONV_CASES = [  # (X shape, W shape, attrs, residual?, activation, bounds)
    ((2, 3, 5, 5), (4, 3, 1, 1), {}, True, "Relu", ()),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1] * 4}, False, "Clip", (-0.3, 0.4)),
    ((1, 4, 6, 6), (4, 2, 3, 3), {"group": 2, "strides": [2, 2]}, True, "Clip", (-0.2, 0.3)),
    ((1, 3, 5, 5), (2, 3, 3, 3), {"pads": [1] * 4}, True, "", ()),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs, with_z, activation, bounds", FUSED_CONV_CASES)
def test_fused_conv_gradient(x_shape, w_shape, attrs, with_z, activation, bounds):
    x, w, b = rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)
    (y,) = run_op("Conv", [x, w, b], **attrs)
    z = rand(*y.shape, seed=4) if with_z else None
    inputs = [x, w, b, z, *(np.array(v, np.float32) for v in bounds)]
    if activation:  # the activation masks some of the gradient
        (out,) = run_op("FusedConv", inputs, activation=activation, **attrs)
        assert (out != y + (0 if z is None else z)).any()
    wrt = [0, 1, 2, 3] if with_z else [0, 1, 2]
    check_gradient(
        "FusedConv", inputs, wrt=wrt, eps=EPS, max_points=30, activation=activation, **attrs
    )


# ConvWinograd, ConvWinogradRelu


def winograd_w_gradient_matches(op_type, x, w, b, transform, attrs, points=12):
    """dW by the maker against central differences in W with U = transform(W) recomputed,
    as the pass would make it (a U left stale by a perturbed W describes another conv)."""
    rng = np.random.default_rng(0)
    op = op_def(op_type, ["x", "w", "u", "b"], ["y"], **attrs)
    (y,) = run_op(op_type, [x, w, transform(w), b], **attrs)
    dy = rng.normal(size=y.shape)
    (dw,), _ = run_gradient(op, [x, w, transform(w), b], dy, [1])

    def f(w_):
        return float(np.sum(run_op(op_type, [x, w_, transform(w_), b], **attrs)[0] * dy))

    for j in rng.permutation(w.size)[:points]:
        plus, minus = w.copy(), w.copy()
        plus.reshape(-1)[j] += EPS
        minus.reshape(-1)[j] -= EPS
        numeric = (f(plus) - f(minus)) / (2 * EPS)
        np.testing.assert_allclose(dw.reshape(-1)[j], numeric, rtol=1e-5, atol=1e-6)


WINOGRAD_CASES = [  # (id, X shape, W shape, transform, attrs, path the forward takes)
    ("f2x2", (1, 64, 14, 14), (64, 64, 3, 3), cw.winograd_weights, {"pads": [1, 1, 1, 1]},
     "winograd_correlate"),
    ("f4x4", (1, 64, 25, 25), (64, 64, 3, 3), winograd4_weights, {"pads": [1, 1, 1, 1]},
     "winograd4_correlate"),
    ("hwc_strided", (1, 3, 7, 7), (4, 3, 3, 3), hwc_weights,
     {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "hwc_correlate"),
    ("small_falls_back", (2, 3, 6, 6), (4, 3, 3, 3), cw.winograd_weights,
     {"pads": [1, 1, 1, 1]}, None),
    ("strided_falls_back", (1, 4, 9, 9), (5, 4, 3, 3), cw.winograd_weights, {"strides": [2, 2]},
     None),
    ("dilated_falls_back", (1, 2, 9, 9), (3, 2, 3, 3), cw.winograd_weights,
     {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, None),
]  # fmt: skip


@pytest.mark.parametrize("op_type", ["ConvWinograd", "ConvWinogradRelu"])
@pytest.mark.parametrize(
    "x_shape, w_shape, transform, attrs, path",
    [case[1:] for case in WINOGRAD_CASES],
    ids=[case[0] for case in WINOGRAD_CASES],
)
def test_conv_winograd_gradient(op_type, x_shape, w_shape, transform, attrs, path, spy):
    x = rand(*x_shape, seed=10, dtype=np.float64)
    w = rand(*w_shape, seed=11, dtype=np.float64) / np.sqrt(np.prod(w_shape[1:]))
    b = rand(w_shape[0], seed=12, dtype=np.float64)
    calls = {name: spy(cw, name) for name in ("winograd_correlate", "winograd4_correlate")}
    calls["hwc_correlate"] = spy(cw, "hwc_correlate")
    u = transform(w)
    # X and B by check_gradient (U stays W's transform); U gets no gradient
    check_gradient(op_type, [x, w, u, b], wrt=[0, 3], eps=EPS, max_points=20, **attrs)
    taken = [name for name, seen in calls.items() if seen]
    assert taken == ([path] if path else [])  # the forward took the path the case is for
    winograd_w_gradient_matches(op_type, x, w, b, transform, attrs)


def test_conv_winograd_gradient_is_convs_and_skips_u():
    op = op_def("ConvWinogradRelu", ["x", "w", "w__winograd", "b"], ["y"], pads=[1, 1, 1, 1])
    ops = GRADIENTS["ConvWinogradRelu"](op, ["y_grad"], ["x_grad", "w_grad", "u_grad", "b_grad"])
    assert [o.type for o in ops] == ["ReluGradient", "ConvGradient"]
    assert list(ops[1].input)[:2] == ["x", "w"]
    assert list(ops[1].output) == ["x_grad", "w_grad", "b_grad"]
    assert not any("u_grad" in o.output for o in ops)
    x, w = rand(1, 2, 5, 5, seed=1), rand(3, 2, 3, 3, seed=2)
    (got,), _ = run_gradient(
        op_def("ConvWinograd", [], []), [x, w, cw.winograd_weights(w)], rand(1, 3, 3, 3), [1]
    )
    (want,), _ = run_gradient(op_def("Conv", [], []), [x, w], rand(1, 3, 3, 3), [1])
    np.testing.assert_array_equal(got, want)  # without B: Conv's gradient, bit for bit


# ConvShuffle

SHUFFLE_CASES = [  # x shape, M, kernel, group, conv attrs, grouped_shape, shape
    ((1, 24, 4, 4), 32, (1, 1), 4, {}, [1, 4, 8, 4, 4], [1, 32, 4, 4]),  # ShuffleNet's
    ((2, 12, 5, 4), 16, (1, 1), 4, {}, [0, 4, -1, 5, 4], [0, -1, 5, 4]),  # 0 and -1
    ((1, 6, 7, 7), 12, (3, 3), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, [1, 3, 4, 4, 4],
     [1, 12, 4, 4]),  # strided grouped 3x3: im2col written shuffled
    ((1, 4, 5, 5), 6, (1, 1), 1, {}, [1, 2, 3, 5, 5], [1, 6, 5, 5]),  # ungrouped: a copy
    ((1, 8, 5, 5), 8, (3, 3), 8, {"pads": [1, 1, 1, 1]}, [1, 2, 4, 5, 5], [1, 8, 5, 5]),
    # depthwise, then shuffled by a copy
    ((1, 16, 4, 4), 16, (1, 1), 4, {}, [1, 8, 2, 16], [1, 16, 16]),  # not a shuffle of Y
]  # fmt: skip


@pytest.mark.parametrize("x_shape, m, kernel, group, attrs, grouped, shape", SHUFFLE_CASES)
@pytest.mark.parametrize("relu", [0, 1])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_shuffle_gradient(x_shape, m, kernel, group, attrs, grouped, shape, relu, bias):
    x = rand(*x_shape, seed=13)
    w = rand(m, x_shape[1] // group, *kernel, seed=14)
    inputs = [x, w] + ([rand(m, seed=15)] if bias else [])
    check_gradient(
        "ConvShuffle", inputs, eps=EPS, max_points=30, grouped_shape=grouped, shape=shape,
        relu=relu, group=group, **attrs,
    )  # fmt: skip


def test_conv_shuffle_gradient_equals_the_unfused_ops():
    """Against autodiff over Conv, Relu, Reshape, Transpose, Reshape: the same numbers."""
    x, w, b = rand(2, 8, 5, 5, seed=16), rand(8, 2, 3, 3, seed=17), rand(8, seed=18)
    grouped, shape = np.array([2, 4, 2, 5, 5]), np.array([2, 8, 5, 5])
    feeds = {"x": x, "w": w, "b": b, "s1": grouped, "s2": shape, "r": rand(2, 8, 5, 5, seed=19)}
    unfused = Net("unfused")
    unfused.Conv(["x", "w", "b"], "c", group=4, pads=[1, 1, 1, 1])
    unfused.Relu("c", "cr")
    unfused.Reshape(["cr", "s1"], "g")
    unfused.Transpose("g", "t", perm=[0, 2, 1, 3, 4])
    unfused.Reshape(["t", "s2"], "y")
    fused = Net("fused")
    fused.ConvShuffle(
        ["x", "w", "b"], "y", group=4, pads=[1, 1, 1, 1], grouped_shape=list(grouped),
        shape=list(shape), relu=1,
    )  # fmt: skip
    got = []
    for net in (unfused, fused):
        net.Mul(["y", "r"], "yr")
        net.ReduceSum(["yr"], "loss", keepdims=0)
        grads = add_gradient_ops(net, ["loss"], wrt=["x", "w", "b"])
        ws = Workspace()
        for name, value in feeds.items():
            ws.feed_blob(name, value)
        ws.run_net_once(net)
        got.append([ws.fetch_blob(grads[p]) for p in ("x", "w", "b")])
    for want, have in zip(*got):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6)


def test_conv_shuffle_output_gradient_checks_shapes():
    x, w = rand(1, 4, 3, 3), rand(4, 2, 1, 1)
    attrs = {"group": 2, "grouped_shape": [1, 2, 2, 3, 3], "shape": [1, 4, 3, 3]}
    (dz,) = run_op("ConvShuffleOutputGradient", [x, w, np.arange(36.0).reshape(1, 4, 3, 3)],
                   **attrs)  # fmt: skip
    # channel j * 2 + g of Y came from group g's channel j: conv channel 2 * g + j
    np.testing.assert_array_equal(dz[0, :, 0, 0], [0.0, 18.0, 9.0, 27.0])
    with pytest.raises(OperatorError, match=r"dY has shape \[1, 4, 9\], expected \[1, 4, 3, 3\]"):
        run_op("ConvShuffleOutputGradient", [x, w, rand(1, 4, 9)], **attrs)
    with pytest.raises(OperatorError, match="grouped_shape"):
        run_op("ConvShuffleOutputGradient", [x, w, rand(1, 4, 3, 3)], group=2,
               grouped_shape=[1, 36], shape=[1, 4, 3, 3])  # fmt: skip


# Summarize


def spread(*shape, dtype=np.float32, seed=0):
    """Values at least 0.1 apart in a random order: no ties within a step of 1e-3."""
    n = int(np.prod(shape))
    values = np.linspace(-1, 1, n) * 0.1 * (n - 1) / 2 + 0.3
    return np.random.default_rng(seed).permutation(values).reshape(shape).astype(dtype)


@pytest.mark.parametrize(
    "x", [spread(7, seed=25), spread(3, 4, seed=26, dtype=np.float64), np.array([2.5])],
    ids=["float32", "float64", "one-value"],
)  # fmt: skip
def test_summarize_gradient(x):
    # Summarize's output is float32 whatever X is: a step of 1e-3 keeps its rounding (1e-7
    # of the values) a small part of each difference
    check_gradient("Summarize", [x], eps=1e-3)


def test_summarize_gradient_splits_ties_and_skips_zero_std():
    x = np.array([1.0, 3.0, 1.0, 3.0, 2.0, 3.0], np.float32)
    ds = np.array([6.0, 3.0, 12.0, 5.0], np.float32)
    (got,) = run_op("SummarizeGradient", [x, ds])
    mean, std = x.mean(), x.std(ddof=1)
    want = ds[2] / 6 + ds[3] * (x - mean) / (5 * std) + np.where(x == 1, 3.0, 0)
    want += np.where(x == 3, 1.0, 0)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)
    (flat,) = run_op("SummarizeGradient", [np.full((2, 2), 4.0), ds])  # std = 0: no std term
    np.testing.assert_allclose(flat, np.full((2, 2), 6 / 4 + 3 / 4 + 12 / 4))
    (ints,) = run_op("SummarizeGradient", [np.arange(4, dtype=np.int32), ds])
    assert ints.dtype == np.int32 and not ints.any()
    with pytest.raises(OperatorError, match=r"dS has shape \[3\], expected \[4\]"):
        run_op("SummarizeGradient", [x, ds[:3]])


def test_summarize_through_autodiff_and_without_output():
    net = Net("through")
    net.Summarize("x", "s")
    net.Mul(["s", "r"], "sr")
    net.ReduceSum(["sr"], "loss", keepdims=0)
    net.Summarize("x", [])  # logs only: nothing to differentiate
    grads = add_gradient_ops(net, ["loss"], wrt=["x"])
    assert [op.type for op in net.ops].count("SummarizeGradient") == 1
    x, r = rand(10, seed=27), np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("r", r)
    ws.run_net_once(net)
    (want,) = run_op("SummarizeGradient", [x, r])
    np.testing.assert_array_equal(ws.fetch_blob(grads["x"]), want)


# End to end: a CNN through the inference passes, then autodiff


def cnn():
    """x -> Conv -> BN (test mode) -> Relu -> 3x3 Conv (64 channels) -> Relu -> grouped 1x1
    Conv -> Relu -> channel shuffle -> GlobalAveragePool -> Flatten -> Gemm -> Relu -> FC ->
    Relu -> Sigmoid -> Mul -> Sub -> y: every fusion the passes make."""
    rng = np.random.default_rng(0)

    def param(*shape, scale=None):
        scale = scale if scale is not None else 1 / np.sqrt(np.prod(shape[1:]) or 1)
        return (rng.normal(size=shape) * scale).astype(np.float32)

    params = {
        "w1": param(64, 3, 3, 3), "b1": param(64, scale=0.1),
        "bn_s": param(64, scale=1) + 1.5, "bn_b": param(64, scale=0.2),
        "bn_m": param(64, scale=0.1), "bn_v": np.abs(param(64, scale=1)) + 0.5,
        "w2": param(64, 64, 3, 3), "b2": param(64, scale=0.1),
        "w3": param(64, 16, 1, 1), "b3": param(64, scale=0.1),
        "s1": np.array([2, 4, 16, 14, 14], np.int64), "s2": np.array([2, 64, 14, 14], np.int64),
        "w4": param(32, 64), "b4": param(32, scale=0.1),
        "w5": param(16, 32), "b5": param(16, scale=0.1),
        "sc": param(16, scale=1), "sh": param(16, scale=1),
    }  # fmt: skip
    net = Net("cnn")
    net.add_external_input("x", *params)
    net.Conv(["x", "w1", "b1"], "c1", pads=[1, 1, 1, 1])
    net.BatchNormalization(["c1", "bn_s", "bn_b", "bn_m", "bn_v"], "n1")
    net.Relu("n1", "r1")
    net.Conv(["r1", "w2", "b2"], "c2", pads=[1, 1, 1, 1])
    net.Relu("c2", "r2")
    net.Conv(["r2", "w3", "b3"], "c3", group=4)
    net.Relu("c3", "r3")
    net.Reshape(["r3", "s1"], "g3")
    net.Transpose("g3", "t3", perm=[0, 2, 1, 3, 4])
    net.Reshape(["t3", "s2"], "sh3")
    net.GlobalAveragePool("sh3", "p")
    net.Flatten("p", "f")
    net.Gemm(["f", "w4", "b4"], "h", transB=1)
    net.Relu("h", "hr")
    net.FC(["hr", "w5", "b5"], "k")
    net.Relu("k", "kr")
    net.Sigmoid("kr", "ks")
    net.Mul(["ks", "sc"], "km")
    net.Sub(["km", "sh"], "y")
    net.add_external_output("y")
    return net.proto(), params


def inference_optimized(net, params):
    """optimize(level=2) but its last pass, blob sharing: that one reuses blobs that a
    backward pass still needs to read, so it is for nets that are only run forward."""
    net, params = rewrite_for_inference(net, params)
    net = fold_constants(net, params)
    net = eliminate_dead_code(eliminate_common_subexpressions(net))
    return fuse_elementwise(net), params


def parameter_gradients(proto, params, x, r, wrt):
    net = Net(proto)
    net.Mul(["y", "r"], "yr")
    net.ReduceSum(["yr"], "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=wrt)
    ws = Workspace()
    for name, value in {**params, "x": x, "r": r}.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    return {name: ws.fetch_blob(grads[name]) for name in wrt}


def test_optimized_cnn_has_the_unoptimized_gradients(spy):
    winograd = spy(cw, "winograd_correlate")
    net, params = cnn()
    optimized, new_params = inference_optimized(net, params)
    assert sorted(op.type for op in optimized.op) == sorted(
        ["ConvRelu", "ConvWinogradRelu", "ConvShuffle", "GlobalAveragePool", "Flatten"]
        + ["GemmRelu", "FCRelu", "FusedElementwise"]
    )
    x = rand(2, 3, 14, 14, seed=28)
    r = rand(2, 16, seed=29)
    shared = ["x", "w2", "b2", "w3", "b3", "w4", "b4", "w5", "b5", "sc", "sh"]
    want = parameter_gradients(net, params, x, r, [*shared, "w1", "b1"])
    got = parameter_gradients(optimized, new_params, x, r, [*shared, "w1_bnfolded", "b1_bnfolded"])
    # the folded conv's weights are s * w1 and s * b1 + t per output channel (s, t from
    # the BN), so d/dw1 = s * d/dw1_bnfolded, d/db1 = s * d/db1_bnfolded
    s = params["bn_s"].astype(np.float64) / np.sqrt(params["bn_v"].astype(np.float64) + 1e-5)
    got["w1"] = got.pop("w1_bnfolded") * s[:, None, None, None]
    got["b1"] = got.pop("b1_bnfolded") * s
    assert winograd  # ConvWinogradRelu took the Winograd path
    for name, value in want.items():
        scale = np.abs(value).max()
        assert scale > 0, f"{name}: its gradient is all zeros, the check would be empty"
        np.testing.assert_allclose(
            got[name], value, rtol=1e-4, atol=1e-4 * scale, err_msg=f"gradient of {name}"
        )


@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (3, 4)])
def test_batch_norm_relu_gradient(x_shape):
    """Inference BN + Relu: the gradient of the unfused pair, in X, scale and B."""
    c = x_shape[1]
    inputs = [rand(*x_shape, seed=1), rand(c, seed=2), rand(c, seed=3), rand(c, seed=4)]
    inputs.append(np.abs(rand(c, seed=5)) + 0.5)
    (y,) = run_op("BatchNormalization", inputs)
    assert (y < 0).any() and (y > 0).any()  # the Relu masks some of the gradient
    check_gradient("BatchNormalizationRelu", inputs, eps=EPS, max_points=30, wrt=[0, 1, 2])
