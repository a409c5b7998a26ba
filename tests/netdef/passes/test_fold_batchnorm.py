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
