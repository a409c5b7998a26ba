"""The transformer-layer passes: a small BERT-style layer, written as torch.onnx exports it,
keeps its numbers while its patterns become MatMulBias, Gelu and SkipLayerNormalization;
each pass on its own, the variants it takes and the nets it must leave alone."""

import math

import numpy as np
import pytest
from _nets import count, run

from netbrew.netdef import op_def
from netbrew.netdef.args import args_dict
from netbrew.netdef.passes import rewrite_for_inference
from netbrew.netdef.passes.transformer import (
    fold_attention_scale,
    fuse_gelu,
    fuse_matmul_bias,
    fuse_skip_layer_norm,
    fuse_transformer,
)
from netbrew.proto.netbrew_pb2 import NetDef, TensorShape

HIDDEN, HEADS, SEQ = 8, 2, 5


def bert_layer(scale_op="Div", split_axis=2):
    """One post-LayerNorm encoder layer in the ops torch.onnx.export writes (hidden 8, 2
    heads, FFN 16, sequence 5, batch 2). Returns (net, params, feeds)."""
    rng = np.random.default_rng(0)
    h, d = HIDDEN, HIDDEN // HEADS

    def w(*shape):
        return rng.normal(size=shape).astype(np.float32) / math.sqrt(shape[0])

    params = {
        "w_qkv": w(h, 3 * h), "b_qkv": w(3 * h), "w_proj": w(h, h), "b_proj": w(h),
        "g1": 1 + w(h), "beta1": w(h), "w_in": w(h, 2 * h), "b_in": w(2 * h),
        "w_out": w(2 * h, h), "b_out": w(h), "g2": 1 + w(h), "beta2": w(h),
        "split": np.array([h, h, h], np.int64),
        "heads": np.array([2, SEQ, HEADS, d], np.int64),
        "merged": np.array([2, SEQ, h], np.int64),
        "scale": np.array(math.sqrt(d) if scale_op == "Div" else 1 / math.sqrt(d), np.float32),
        "sqrt2": np.array(math.sqrt(2), np.float32), "one": np.array(1, np.float32),
        "half": np.array(0.5, np.float32),
    }  # fmt: skip
    ops = [
        op_def("MatMul", ["x", "w_qkv"], ["qkv0"]),
        op_def("Add", ["b_qkv", "qkv0"], ["qkv"]),
        op_def("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=split_axis),
        op_def("Reshape", ["q0", "heads"], ["q1"]),
        op_def("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        op_def("Reshape", ["k0", "heads"], ["k1"]),
        op_def("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        op_def("Reshape", ["v0", "heads"], ["v1"]),
        op_def("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        op_def("MatMul", ["q", "kt"], ["s"]),
        op_def(scale_op, ["s", "scale"], ["s_scaled"]),
        op_def("Softmax", ["s_scaled"], ["p"], axis=-1),
        op_def("MatMul", ["p", "v"], ["c0"]),
        op_def("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
        op_def("Reshape", ["c1", "merged"], ["c"]),
        op_def("MatMul", ["c", "w_proj"], ["o0"]),
        op_def("Add", ["b_proj", "o0"], ["o"]),
        op_def("Add", ["x", "o"], ["r1"]),
        op_def("LayerNormalization", ["r1", "g1", "beta1"], ["n1"], axis=-1, epsilon=1e-5),
        op_def("MatMul", ["n1", "w_in"], ["f0"]),
        op_def("Add", ["b_in", "f0"], ["f"]),
        op_def("Div", ["f", "sqrt2"], ["g_div"]),
        op_def("Erf", ["g_div"], ["g_erf"]),
        op_def("Add", ["g_erf", "one"], ["g_add"]),
        op_def("Mul", ["f", "g_add"], ["g_mul"]),
        op_def("Mul", ["g_mul", "half"], ["gelu"]),
        op_def("MatMul", ["gelu", "w_out"], ["e0"]),
        op_def("Add", ["b_out", "e0"], ["e"]),
        op_def("Add", ["n1", "e"], ["r2"]),
        op_def("LayerNormalization", ["r2", "g2", "beta2"], ["y"], axis=-1, epsilon=1e-5),
    ]
    net = NetDef(name="bert", external_input=["x", *params], external_output=["y"])
    net.op.extend(ops)
    net.value_info.append(TensorShape(name="qkv", dims=[2, SEQ, 3 * h], data_type=1))
    feeds = {"x": rng.normal(size=(2, SEQ, h)).astype(np.float32)}
    return net, params, feeds


def outputs(net, params, feeds):
    return run(net, {**feeds, **params})[0]


def types(net):
    return [op.type for op in net.op]


def test_the_layer_keeps_its_numbers_in_eighteen_ops():
    net, params, feeds = bert_layer()
    out, new_params = fuse_transformer(net, params)
    assert count(out, "MatMulBias") == 4 and count(out, "SkipLayerNormalization") == 2
    for gone in ("Div", "Erf", "Add", "Mul", "LayerNormalization"):
        assert count(out, gone) == 0, gone
    assert len(out.op) == 18
    ffn_in = next(op for op in out.op if "w_in" in op.input)
    assert args_dict(ffn_in.arg) == {"activation": "Gelu"}
    np.testing.assert_allclose(
        outputs(out, new_params, feeds), outputs(net, params, feeds), rtol=1e-5, atol=1e-5
    )
    assert set(params) < set(new_params) and all(
        new_params[k] is v for k, v in params.items()
    )  # the old params are kept, unchanged, beside the scaled ones


def test_rewrite_for_inference_fuses_on_the_cpu_only():
    net, params, _ = bert_layer()
    cpu, _ = rewrite_for_inference(net, params, "cpu")
    assert count(cpu, "MatMulBias") == 4
    gpu, gpu_params = rewrite_for_inference(net, params, "cuda:0")
    assert types(gpu) == types(net) and gpu_params == params


def test_ops_placed_on_a_gpu_are_left_alone():
    net, params, _ = bert_layer()
    for op in net.op:
        op.device_option.device_type = 1
    out, new_params = fuse_transformer(net, params)
    assert types(out) == types(net) and set(new_params) == set(params)


# fuse_gelu


def _gelu_net(tail, x_op=("Div", "sqrt2")):
    """y = GELU(x) written out: x_op (Div by sqrt 2 or Mul by 1/sqrt 2), Erf, Add 1, `tail`."""
    net = NetDef(name="gelu", external_input=["x", "sqrt2", "isqrt2", "one", "half"])
    net.external_output.append("y")
    net.op.extend(
        [
            op_def("Relu", ["x"], ["h"]),  # x of the GELU is an op's output
            op_def(x_op[0], ["h", x_op[1]], ["d"]),
            op_def("Erf", ["d"], ["e"]),
            op_def("Add", ["one", "e"], ["a"]),
            *tail,
        ]
    )
    return net


GELU_PARAMS = {
    "sqrt2": np.array(math.sqrt(2), np.float32),
    "isqrt2": np.array(1 / math.sqrt(2), np.float32),
    "one": np.array(1, np.float32),
    "half": np.array(0.5, np.float32),
}
GELU_TAILS = {
    "(x * a) * 0.5": [op_def("Mul", ["a", "h"], ["m"]), op_def("Mul", ["half", "m"], ["y"])],
    "(a * 0.5) * x": [op_def("Mul", ["a", "half"], ["m"]), op_def("Mul", ["h", "m"], ["y"])],
    "(x * 0.5) * a": [op_def("Mul", ["h", "half"], ["m"]), op_def("Mul", ["m", "a"], ["y"])],
}


@pytest.mark.parametrize("tail", list(GELU_TAILS))
@pytest.mark.parametrize("x_op", [("Div", "sqrt2"), ("Mul", "isqrt2")])
def test_fuse_gelu_takes_each_grouping(tail, x_op):
    net = _gelu_net(GELU_TAILS[tail], x_op)
    out = fuse_gelu(net, GELU_PARAMS)
    assert types(out) == ["Relu", "Gelu"] and list(out.op[1].input) == ["h"]
    assert list(out.op[1].output) == ["y"]
    feeds = {"x": np.linspace(-4, 4, 30, dtype=np.float32).reshape(5, 6), **GELU_PARAMS}
    np.testing.assert_allclose(run(out, feeds)[0], run(net, feeds)[0], rtol=1e-6, atol=1e-7)


def test_fuse_gelu_leaves_near_misses_alone():
    tail = GELU_TAILS["(x * a) * 0.5"]
    wrong = {**GELU_PARAMS, "half": np.array(0.6, np.float32)}
    assert count(fuse_gelu(_gelu_net(tail), wrong), "Gelu") == 0  # not 0.5
    assert count(fuse_gelu(_gelu_net(tail), {}), "Gelu") == 0  # constants unknown
    shared = _gelu_net([*tail, op_def("Sigmoid", ["e"], ["z"])])  # Erf read twice
    assert count(fuse_gelu(shared, GELU_PARAMS), "Gelu") == 0
    other_x = _gelu_net(
        [op_def("Mul", ["a", "x"], ["m"]), op_def("Mul", ["m", "half"], ["y"])]
    )  # multiplies x, not the Div's input h
    assert count(fuse_gelu(other_x, GELU_PARAMS), "Gelu") == 0
    overwritten = _gelu_net([op_def("Neg", ["x"], ["h"]), *tail])  # h changes before the Mul
    assert count(fuse_gelu(overwritten, GELU_PARAMS), "Gelu") == 0
    output = _gelu_net(tail)
    output.external_output.append("a")  # a net output must stay
    assert count(fuse_gelu(output, GELU_PARAMS), "Gelu") == 0


# fuse_matmul_bias


def _matmul_net(*tail, bias_first=True):
    net = NetDef(name="mm", external_input=["x", "w", "b"], external_output=["y"])
    add = ["b", "t"] if bias_first else ["t", "b"]
    net.op.extend([op_def("MatMul", ["x", "w"], ["t"]), op_def("Add", add, ["s"]), *tail])
    return net


MM_PARAMS = {
    "w": np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32),
    "b": np.random.default_rng(2).normal(size=(4,)).astype(np.float32),
}
MM_FEEDS = {"x": np.random.default_rng(3).normal(size=(2, 3, 6)).astype(np.float32)}


@pytest.mark.parametrize("bias_first", [True, False])
@pytest.mark.parametrize("gelu", [False, True])
def test_fuse_matmul_bias(bias_first, gelu):
    tail = op_def("Gelu", ["s"], ["y"]) if gelu else op_def("Relu", ["s"], ["y"])
    net = _matmul_net(tail, bias_first=bias_first)
    out = fuse_matmul_bias(net, MM_PARAMS)
    fused = out.op[0]
    assert fused.type == "MatMulBias" and list(fused.input) == ["x", "w", "b"]
    assert types(out) == (["MatMulBias"] if gelu else ["MatMulBias", "Relu"])
    assert args_dict(fused.arg) == ({"activation": "Gelu"} if gelu else {})
    feeds = {**MM_FEEDS, **MM_PARAMS}
    np.testing.assert_allclose(run(out, feeds)[0], run(net, feeds)[0], rtol=1e-5, atol=1e-6)


def test_fuse_matmul_bias_needs_a_constant_row_bias_and_weight():
    relu = op_def("Relu", ["s"], ["y"])
    column = {**MM_PARAMS, "b": np.ones((3, 1), np.float32)}
    assert count(fuse_matmul_bias(_matmul_net(relu), column), "MatMulBias") == 0
    assert count(fuse_matmul_bias(_matmul_net(relu), {"b": MM_PARAMS["b"]}), "MatMulBias") == 0
    written = _matmul_net(relu)
    written.op.insert(0, op_def("Abs", ["b"], ["b"]))  # the bias is computed
    assert count(fuse_matmul_bias(written, MM_PARAMS), "MatMulBias") == 0
    overwritten = _matmul_net(relu)
    overwritten.op.insert(1, op_def("Neg", ["x"], ["x"]))  # x changes before the Add
    assert count(fuse_matmul_bias(overwritten, MM_PARAMS), "MatMulBias") == 0
    tanh = _matmul_net(op_def("Gelu", ["s"], ["y"], approximate="tanh"))
    out = fuse_matmul_bias(tanh, MM_PARAMS)
    assert types(out) == ["MatMulBias", "Gelu"]  # only the exact GELU fuses


# fuse_skip_layer_norm


def _skip_net(*outs):
    net = NetDef(name="sk", external_input=["x", "r", "g", "b"], external_output=["y"])
    norm = op_def("LayerNormalization", ["s", "g", "b"], ["y", *outs], axis=-1, epsilon=1e-3)
    net.op.extend([op_def("Add", ["x", "r"], ["s"]), norm])
    return net


def test_fuse_skip_layer_norm():
    net = _skip_net()
    out = fuse_skip_layer_norm(net)
    assert types(out) == ["SkipLayerNormalization"]
    assert list(out.op[0].input) == ["x", "r", "g", "b"]
    assert args_dict(out.op[0].arg) == {"axis": -1, "epsilon": pytest.approx(1e-3)}
    rng = np.random.default_rng(0)
    feeds = {k: rng.normal(size=s).astype(np.float32) for k, s in zip("xrgb", [(2, 3, 7)] * 2)}
    feeds.update(g=rng.normal(size=7).astype(np.float32), b=rng.normal(size=7).astype(np.float32))
    np.testing.assert_allclose(run(out, feeds)[0], run(net, feeds)[0], rtol=1e-5, atol=1e-6)


def test_fuse_skip_layer_norm_leaves_alone():
    assert types(fuse_skip_layer_norm(_skip_net("mean"))) == ["Add", "LayerNormalization"]
    shared = _skip_net()
    shared.op.append(op_def("Relu", ["s"], ["z"]))  # the sum has a second reader
    assert count(fuse_skip_layer_norm(shared), "SkipLayerNormalization") == 0
    as_scale = _skip_net()
    as_scale.op[1].input[1] = "s"  # the sum is read as Scale too
    assert count(fuse_skip_layer_norm(as_scale), "SkipLayerNormalization") == 0


# fold_attention_scale


@pytest.mark.parametrize("scale_op", ["Div", "Mul"])
def test_fold_attention_scale_scales_the_q_or_k_columns_of_the_qkv_weights(scale_op):
    net, params, feeds = bert_layer(scale_op)
    out, new_params = fold_attention_scale(net, params)
    assert count(out, scale_op) == count(net, scale_op) - 1  # the GELU's Div and Muls stay
    assert len(out.op) == len(net.op) - 1
    qkv = out.op[0]
    w, b = new_params[qkv.input[1]], new_params[out.op[1].input[0]]
    h, factor = HIDDEN, 0.5  # 1 / sqrt(4)
    assert qkv.input[1] == "w_qkv__scaled0" and "w_qkv__scaled0" in out.external_input
    cols = [slice(0, h), slice(h, 2 * h)]  # Q's columns or K's: one of them is scaled
    scaled = [np.allclose(w[:, c], params["w_qkv"][:, c] * factor) for c in cols]
    assert sorted(scaled) == [False, True]
    np.testing.assert_array_equal(w[:, 2 * h :], params["w_qkv"][:, 2 * h :])  # V's as they were
    np.testing.assert_array_equal(b[2 * h :], params["b_qkv"][2 * h :])
    np.testing.assert_allclose(
        outputs(out, new_params, feeds), outputs(net, params, feeds), rtol=1e-5, atol=1e-6
    )


def test_fold_attention_scale_leaves_alone():
    net, params, _ = bert_layer(split_axis=1)  # a split that is not along the last axis
    out, new_params = fold_attention_scale(net, params)
    assert types(out) == types(net) and new_params == params
    shared, params, _ = bert_layer()
    shared.op.append(op_def("Relu", ["q1"], ["z"]))  # Q has a second reader
    shared.op.append(op_def("Relu", ["k1"], ["z2"]))  # and K
    out, _ = fold_attention_scale(shared, params)
    assert count(out, "Div") == 2


def test_fold_attention_scale_on_a_constant_operand():
    net = NetDef(name="c", external_input=["x", "w", "c"], external_output=["y"])
    net.op.extend([op_def("MatMul", ["x", "w"], ["s"]), op_def("Div", ["s", "c"], ["y"])])
    params = {"w": np.arange(6, dtype=np.float32).reshape(3, 2), "c": np.array(4, np.float32)}
    out, new_params = fold_attention_scale(net, params)
    assert types(out) == ["MatMul"] and list(out.op[0].output) == ["y"]
    np.testing.assert_array_equal(new_params[out.op[0].input[1]], params["w"] / 4)
    np.testing.assert_array_equal(params["w"], np.arange(6).reshape(3, 2))  # not modified


def test_the_fused_layer_exports_to_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from netbrew.converters.onnx import export

    net, params, feeds = bert_layer()
    out, new_params = fuse_transformer(net, params)
    init = NetDef(name="init")
    for name, value in new_params.items():
        fill = "GivenTensorInt64Fill" if value.dtype == np.int64 else "GivenTensorFill"
        init.op.append(op_def(fill, [], [name], shape=list(value.shape), values=value.ravel()))
    model = export(out, init, inputs={"x": feeds["x"]})
    exported = {node.op_type for node in model.graph.node}
    assert {"MatMul", "Add", "Gelu", "LayerNormalization"} <= exported
    assert not exported & {"MatMulBias", "SkipLayerNormalization"}
    session = ort.InferenceSession(model.SerializeToString())
    (got,) = session.run(None, feeds)
    np.testing.assert_allclose(got, outputs(net, params, feeds), rtol=1e-4, atol=1e-5)


def test_the_fused_layer_differentiates_as_the_layer_did():
    from netbrew.executor import Workspace
    from netbrew.netdef import Net
    from netbrew.netdef.autodiff import add_gradient_ops

    net, params, feeds = bert_layer()
    fused = fuse_skip_layer_norm(fuse_matmul_bias(fuse_gelu(net, params), params), params)
    assert count(fused, "MatMulBias") == 4 and count(fused, "SkipLayerNormalization") == 2
    wrt = ["x", "w_qkv", "b_in", "w_out", "g1", "beta2"]
    r = np.random.default_rng(5).normal(size=(2, SEQ, HIDDEN)).astype(np.float32)
    got = []
    for proto in (net, fused):
        model = Net(proto)
        model.Mul(["y", "r"], "yr")
        model.ReduceSum(["yr"], "loss", keepdims=0)
        grads = add_gradient_ops(model, ["loss"], wrt=wrt)
        ws = Workspace()
        for name, value in {**feeds, **params, "r": r}.items():
            ws.feed_blob(name, value)
        ws.run_net_once(model)
        got.append([ws.fetch_blob(grads[p]) for p in wrt])
    for name, want, have in zip(wrt, *got):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5, err_msg=name)
