"""fold_batch_norm puts inference BatchNormalization into the Conv/Gemm/FC weights."""

import numpy as np
import pytest
from _nets import conv_bn_net, count, run

from netbrew.netdef import op_def
from netbrew.netdef.passes import fold_batch_norm
from netbrew.proto.netbrew_pb2 import NetDef


def test_conv_bn_folds():
    net, params, feeds = conv_bn_net()
    snapshot = net.SerializeToString()
    out, new_params = fold_batch_norm(net, params)
    assert net.SerializeToString() == snapshot
    assert count(net, "BatchNormalization") == 1 and count(out, "BatchNormalization") == 0
    assert "c1_w_bnfolded" in new_params and "c1_w" not in new_params
    before, after = run(net, {**feeds, **params}), run(out, {**feeds, **new_params})
    np.testing.assert_allclose(after[0], before[0], atol=1e-4)


@pytest.mark.parametrize(
    "op_type, trans_b, bias", [("Gemm", 1, True), ("Gemm", 0, False), ("FC", 1, True)]
)
def test_gemm_and_fc_bn_fold(op_type, trans_b, bias):
    rng = np.random.default_rng(1)
    w = rng.normal(size=(6, 4) if trans_b else (4, 6)).astype(np.float32)
    params = {"w": w, "b": rng.normal(size=6).astype(np.float32)}
    for name, low in (("s", -1), ("bb", -1), ("m", -1), ("v", 0.5)):
        params[name] = rng.uniform(low, 1.5, 6).astype(np.float32)
    ins = ["x", "w", "b"] if bias else ["x", "w"]
    args = {"transB": trans_b, "beta": 0.5} if op_type == "Gemm" else {}
    net = NetDef(name="n", external_input=["x", *params], external_output=["y"])
    net.op.extend(
        [
            op_def(op_type, ins, ["h"], **args),
            op_def("BatchNormalization", ["h", "s", "bb", "m", "v"], ["y"], epsilon=1e-3),
        ]
    )
    out, new_params = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == [op_type]
    feeds = {"x": rng.normal(size=(5, 4)).astype(np.float32)}
    np.testing.assert_allclose(
        run(out, {**feeds, **new_params})[0], run(net, {**feeds, **params})[0], atol=1e-4
    )


def _conv_chain_net(steps, const_shape=(1, 6, 1, 1)):
    """Conv (6 output channels) followed by `steps`: (op type, constant name or None for
    a BN), with per-channel constants of `const_shape`."""
    rng = np.random.default_rng(5)
    params = {"w": rng.normal(size=(6, 3, 3, 3)).astype(np.float32)}
    for name, low in (("s", -1), ("bb", -1), ("m", -1), ("v", 0.5)):
        params[name] = rng.uniform(low, 1.5, 6).astype(np.float32)
    ops, src = [op_def("Conv", ["x", "w"], ["h0"], pads=[1, 1, 1, 1])], "h0"
    for k, (op_type, const) in enumerate(steps, 1):
        if op_type == "BatchNormalization":
            ops.append(op_def(op_type, [src, "s", "bb", "m", "v"], [f"h{k}"]))
        else:
            params[const] = rng.uniform(0.5, 1.5, const_shape).astype(np.float32)
            ops.append(op_def(op_type, [src, const], [f"h{k}"]))
        src = f"h{k}"
    ops.append(op_def("Relu", [src], ["y"]))
    net = NetDef(name="n", external_input=["x", *params], external_output=["y"])
    net.op.extend(ops)
    feeds = {"x": rng.normal(size=(2, 3, 5, 5)).astype(np.float32)}
    return net, params, feeds


@pytest.mark.parametrize(
    "steps, const_shape",
    [
        ([("BatchNormalization", None), ("Mul", "k1"), ("Add", "k2")], (1, 6, 1, 1)),
        ([("Mul", "k1"), ("Add", "k2")], (6, 1, 1)),  # Caffe2 scale and shift
        ([("Sub", "k1"), ("BatchNormalization", None), ("Mul", "k2")], ()),  # scalars
    ],
)
def test_chain_of_affine_steps_folds_into_conv(steps, const_shape):
    net, params, feeds = _conv_chain_net(steps, const_shape)
    out, new_params = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == ["Conv", "Relu"]
    assert out.op[0].output[0] == out.op[1].input[0] == f"h{len(steps)}"
    np.testing.assert_allclose(
        run(out, {**feeds, **new_params})[0], run(net, {**feeds, **params})[0], atol=1e-4
    )


@pytest.mark.parametrize("const_shape", [(6, 1), (2, 6, 1, 1), (1, 1, 5, 1), (1, 6, 1, 1, 1)])
def test_constants_that_are_not_per_channel_stay(const_shape):
    net, params, _ = _conv_chain_net([("Mul", "k1")], const_shape)
    out, _ = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == ["Conv", "Mul", "Relu"]


def test_chain_stops_at_a_second_reader_and_at_constant_on_the_left_of_sub():
    net, params, feeds = _conv_chain_net([("Mul", "k1"), ("Add", "k2")])
    net.op.append(op_def("Relu", ["h1"], ["z"]))  # h1 (after Mul) read twice
    net.external_output.append("z")
    out, new_params = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == ["Conv", "Add", "Relu", "Relu"]
    before, after = run(net, {**feeds, **params}), run(out, {**feeds, **new_params})
    for a, b in zip(after, before):
        np.testing.assert_allclose(a, b, atol=1e-4)
    net, params, _ = _conv_chain_net([("Sub", "k1")])
    net.op[1].input[:] = ["k1", "h0"]  # k1 - h: not s * h + t with s = 1
    out, _ = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == ["Conv", "Sub", "Relu"]


def _bn_chain_net(const_shape, rank_known=True):
    """Concat -> BN -> Mul -> Add -> Relu, as DenseNet's dense layers (a BN no op before it
    takes), with the Concat's output rank in value_info when `rank_known`."""
    rng = np.random.default_rng(3)
    params = {
        "s": rng.uniform(0.5, 1.5, 6).astype(np.float32),
        "b": rng.normal(size=6).astype(np.float32),
        "m": rng.normal(size=6).astype(np.float32),
        "v": rng.uniform(0.5, 1.5, 6).astype(np.float32),
        "k1": rng.uniform(0.5, 1.5, const_shape).astype(np.float32),
        "k2": rng.normal(size=const_shape).astype(np.float32),
    }
    ops = [
        op_def("Concat", ["x1", "x2"], ["c"], axis=1),
        op_def("BatchNormalization", ["c", "s", "b", "m", "v"], ["h0"]),
        op_def("Mul", ["h0", "k1"], ["h1"]),
        op_def("Add", ["k2", "h1"], ["h2"]),
        op_def("Relu", ["h2"], ["y"]),
    ]
    net = NetDef(name="n", external_input=["x1", "x2", *params], external_output=["y"])
    net.op.extend(ops)
    if rank_known:
        info = net.value_info.add()
        info.name, info.dims[:] = "c", [2, 6, 5, 5]
    feeds = {n: rng.normal(size=(2, 3, 5, 5)).astype(np.float32) for n in ("x1", "x2")}
    return net, params, feeds


@pytest.mark.parametrize("const_shape", [(6, 1, 1), (1, 6, 1, 1), ()])
def test_a_lone_bn_takes_the_chain_after_it(const_shape):
    net, params, feeds = _bn_chain_net(const_shape)
    out, new_params = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == ["Concat", "BatchNormalization", "Relu"]
    bn = out.op[1]
    assert list(bn.input) == ["c", "s_chainfolded", "b_chainfolded", "m", "v"]
    assert bn.output[0] == out.op[2].input[0] == "h2"
    assert not {"k1", "k2", "s", "b"} & set(new_params) and "s_chainfolded" in new_params
    np.testing.assert_allclose(
        run(out, {**feeds, **new_params})[0], run(net, {**feeds, **params})[0], atol=1e-5
    )


def test_a_lone_bn_keeps_its_chain_without_a_known_rank_or_per_channel_constants():
    net, params, _ = _bn_chain_net((6, 1, 1), rank_known=False)  # (6, 1, 1) on a rank-3 X?
    out, _ = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == [op.type for op in net.op]
    net, params, _ = _bn_chain_net((1, 1, 5, 1))  # varies along H
    out, _ = fold_batch_norm(net, params)
    assert [op.type for op in out.op] == [op.type for op in net.op]
