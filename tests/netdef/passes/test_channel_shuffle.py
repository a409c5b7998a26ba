"""fold_channel_shuffle turns Conv (+ Relu) -> Reshape -> Transpose -> Reshape into one
ConvShuffle with the same numbers, only where the chain is a private, constant-shaped one."""

import numpy as np
import pytest
from _nets import assert_same, run

from netbrew.netdef import op_def, optimize
from netbrew.netdef.passes import fold_channel_shuffle, fuse_activation
from netbrew.proto.netbrew_pb2 import NetDef

SHAPES = {"s5": np.array([0, 4, 6, 5, 5], np.int64), "s4": np.array([0, 24, 5, 5], np.int64)}


def shuffle_net(*, perm=(0, 2, 1, 3, 4), extra=(), outputs=("y",), allowzero=0):
    """x -> 1x1 grouped conv (4 groups) -> Relu -> shuffle -> depthwise 3x3 conv -> y."""
    net = NetDef(name="n", external_input=["x", "w", "b", "dw", "s5", "s4"])
    net.external_output.extend(outputs)
    net.op.extend(
        [
            op_def("Conv", ["x", "w", "b"], ["c"], group=4, kernel_shape=[1, 1]),
            op_def("Relu", ["c"], ["r"]),
            op_def("Reshape", ["r", "s5"], ["g"], allowzero=allowzero),
            op_def("Transpose", ["g"], ["t"], perm=list(perm)),
            op_def("Reshape", ["t", "s4"], ["z"]),
            op_def("Conv", ["z", "dw"], ["y"], group=24, pads=[1, 1, 1, 1]),
            *extra,
        ]
    )
    rng = np.random.default_rng(0)
    params = {
        "w": rng.normal(size=(24, 4, 1, 1)).astype(np.float32),
        "b": rng.normal(size=24).astype(np.float32),
        "dw": rng.normal(size=(24, 1, 3, 3)).astype(np.float32),
        **SHAPES,
    }
    feeds = {"x": rng.normal(size=(2, 16, 5, 5)).astype(np.float32), **params}
    return net, params, feeds


def test_chain_folds_into_conv_shuffle():
    net, params, feeds = shuffle_net()
    out = fold_channel_shuffle(fuse_activation(net), params)
    assert [op.type for op in out.op] == ["ConvShuffle", "Conv"]
    fused = out.op[0]
    assert list(fused.output) == ["z"]
    args = {a.name: list(a.ints) or a.i for a in fused.arg}
    assert args["grouped_shape"] == [0, 4, 6, 5, 5] and args["shape"] == [0, 24, 5, 5]
    assert args["relu"] == 1 and args["group"] == 4
    assert_same(net, out, feeds)
    # without the Relu fused first, the bare Conv folds with relu=0 and the Relu stays
    plain, _, _ = shuffle_net()
    del plain.op[1]
    plain.op[1].input[0] = "c"
    out = fold_channel_shuffle(plain, params)
    assert [op.type for op in out.op] == ["ConvShuffle", "Conv"]
    assert {a.name: a.i for a in out.op[0].arg}["relu"] == 0
    assert_same(plain, out, feeds)


@pytest.mark.parametrize(
    "change",
    [
        dict(perm=(0, 1, 2, 3, 4)),  # not the swap of the group axes
        dict(extra=[op_def("Sigmoid", ["g"], ["s"])], outputs=("y", "s")),  # g read twice
        dict(outputs=("y", "t")),  # an intermediate is a net output
        dict(allowzero=1),  # 0 would be a literal 0
        dict(extra=[op_def("Shape", ["x"], ["s4"])]),  # the shape is written by an op
    ],
)
def test_chain_is_kept_where_it_must_be(change):
    net, params, feeds = shuffle_net(**change)
    out = fold_channel_shuffle(fuse_activation(net), params)
    assert "ConvShuffle" not in [op.type for op in out.op]


def test_shape_fed_at_run_time_is_not_folded():
    net, params, feeds = shuffle_net()
    del params["s4"]  # not a param: a feed that may change
    out = fold_channel_shuffle(fuse_activation(net), params)
    assert "ConvShuffle" not in [op.type for op in out.op]


def test_optimize_folds_it_and_keeps_the_numbers():
    net, params, feeds = shuffle_net()
    out, new_params = optimize(net, level=2, params=params)
    assert "ConvShuffle" in [op.type for op in out.op]
    assert "Reshape" not in [op.type for op in out.op]
    want = run(net, feeds)
    got = run(out, {**feeds, **new_params})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_exported_model_is_the_folded_chain():
    ort = pytest.importorskip("onnxruntime")
    from netbrew.converters.onnx import export
    from netbrew.netdef import Net

    net, params, feeds = shuffle_net()
    folded = fold_channel_shuffle(fuse_activation(net), params)
    init = Net("init")
    for name, value in params.items():
        fill = "GivenTensorInt64Fill" if value.dtype == np.int64 else "GivenTensorFill"
        getattr(init, fill)([], name, shape=list(value.shape), values=value.ravel().tolist())
    model = export(folded, init, inputs={"x": feeds["x"]}, opset=21)
    assert [n.op_type for n in model.graph.node] == [
        *("Conv", "Relu", "Reshape", "Transpose", "Reshape", "Conv")
    ]
    session = ort.InferenceSession(model.SerializeToString())
    (got,) = session.run(None, {"x": feeds["x"]})
    np.testing.assert_allclose(got, run(net, feeds)[0], rtol=1e-4, atol=1e-4)
