"""Caffe2 ops that share an ONNX op's name but not its defaults or arguments, Caffe2's
legacy broadcast by axis_str, Load(load_all=1), brew's Caffe2 keyword arguments,
rnn_cell.LSTM's padded steps and Predictor.run with a list: each checked against NumPy
written after Caffe2's operator code."""

import numpy as np
import pytest

import netbrew as nb
from netbrew.caffe2.python import brew, core, model_helper, rnn_cell, workspace
from netbrew.errors import FeedError, UnsupportedConversion
from netbrew.netdef import Net

RNG = np.random.default_rng(0)


def run(build, **feeds):
    for name, value in feeds.items():
        workspace.FeedBlob(name, value)
    net = core.Net("t")
    build(net)
    workspace.RunNetOnce(net)
    return net


X = np.arange(2 * 6 * 4, dtype=np.float32).reshape(2, 6, 4)


@pytest.mark.parametrize(
    ("kwargs", "axis", "sizes"),
    [
        ({}, 1, [2, 2, 2]),  # Caffe2's default: the channel axis of order NCHW
        ({"order": "NHWC"}, -1, None),  # NHWC's channel axis is 3; X is 3-D, see below
        ({"axis": 2, "split": [1, 2, 1]}, 2, [1, 2, 1]),
        ({"axis": 1}, 1, [2, 2, 2]),
        ({"axis": 1, "split": [1, 5, 0]}, 1, [1, 5, 0]),
    ],
)
def test_split_takes_caffe2s_axis_and_sizes(kwargs, axis, sizes):
    if "order" in kwargs:
        x = RNG.normal(size=(2, 3, 4, 6)).astype(np.float32)
        run(lambda n: n.Split("x", ["a", "b", "c"], **kwargs), x=x)
        expected = np.split(x, 3, axis=3)
    else:
        run(lambda n: n.Split("x", ["a", "b", "c"], **kwargs), x=X)
        expected = np.split(X, np.cumsum(sizes)[:-1], axis=axis)
    for name, want in zip("abc", expected):
        np.testing.assert_array_equal(workspace.FetchBlob(name), want)


def test_split_sizes_from_an_input_and_add_axis():
    workspace.FeedBlob("sizes", np.array([4, 2], np.int32))
    run(lambda n: n.Split(["x", "sizes"], ["a", "b"], axis=1), x=X)
    np.testing.assert_array_equal(workspace.FetchBlob("b"), X[:, 4:])
    run(lambda n: n.Split("x", ["p", "q"], axis=0, add_axis=1), x=X)
    np.testing.assert_array_equal(workspace.FetchBlob("q"), X[1])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_defaults_to_the_last_axis_keeping_it(op):
    y = RNG.normal(size=(3, 4, 5)).astype(np.float32)
    run(lambda n: getattr(n, op)("y", "i"), y=y)
    want = getattr(np, op.lower())(y, axis=-1)[..., None]
    np.testing.assert_array_equal(workspace.FetchBlob("i"), want)
    run(lambda n: getattr(n, op)("y", "j", axis=1, keepdims=0), y=y)
    np.testing.assert_array_equal(workspace.FetchBlob("j"), getattr(np, op.lower())(y, axis=1))


def test_topk_tile_pow_onehot_and_reduce_l2_take_arguments():
    y = RNG.normal(size=(3, 6)).astype(np.float32)
    run(lambda n: n.TopK("y", ["v", "i"], k=2), y=y)
    order = np.argsort(-y, axis=-1)[:, :2]
    np.testing.assert_array_equal(workspace.FetchBlob("i"), order)
    np.testing.assert_array_equal(workspace.FetchBlob("v"), np.take_along_axis(y, order, -1))
    run(lambda n: n.Tile("y", "t", tiles=3, axis=1), y=y)
    np.testing.assert_array_equal(workspace.FetchBlob("t"), np.tile(y, (1, 3)))
    run(lambda n: n.Pow("y", "p", exponent=2.0), y=y)
    np.testing.assert_allclose(workspace.FetchBlob("p"), y**2, rtol=1e-6)
    workspace.FeedBlob("size", np.array(5, np.int64))
    run(lambda n: n.OneHot(["ids", "size"], "h"), ids=np.array([0, 4, 2], np.int64))
    np.testing.assert_array_equal(workspace.FetchBlob("h"), np.eye(5, dtype=np.float32)[[0, 4, 2]])
    run(lambda n: n.ReduceL2("y", "r", axes=[1], keepdims=0), y=y)
    np.testing.assert_allclose(workspace.FetchBlob("r"), np.linalg.norm(y, axis=1), rtol=1e-6)
    with pytest.raises(UnsupportedConversion, match="TopK: expected an argument k"):
        core.Net("bad").TopK("y", ["v", "i"])


@pytest.mark.parametrize(("order", "letter", "shape"), [("NCHW", "C", (1, 3, 1, 1)),
                                                         ("NHWC", "C", (1, 1, 1, 3)),
                                                         ("NCHW", "H", (1, 1, 3, 1))])  # fmt: skip
def test_legacy_broadcast_reads_axis_str_within_order(order, letter, shape):
    x = RNG.normal(size=(2, 3, 3, 3)).astype(np.float32)
    b = np.array([1.0, 2.0, 3.0], np.float32)
    run(lambda n: n.Add(["x", "b"], "y", broadcast=1, axis_str=letter, order=order), x=x, b=b)
    np.testing.assert_array_equal(workspace.FetchBlob("y"), x + b.reshape(shape))
    with pytest.raises(UnsupportedConversion, match="axis_str 'D' is not an axis"):
        core.Net("bad").Add(["x", "b"], "z", broadcast=1, axis_str="D")


def test_load_all_with_no_outputs_restores_every_blob(tmp_path):
    db = str(tmp_path / "checkpoint.minidb")
    w, it = np.arange(3, dtype=np.float32), np.array([5], np.int64)
    workspace.FeedBlob("w", w)
    workspace.FeedBlob("it", it)
    save = core.CreateOperator("Save", ["w", "it"], [], db=db, db_type="minidb")
    workspace.RunOperatorOnce(save)
    workspace.ResetWorkspace()
    load = core.CreateOperator("Load", [], [], db=db, db_type="minidb", load_all=1)
    workspace.RunOperatorOnce(load)
    assert sorted(workspace.Blobs()) == ["it", "w"]
    np.testing.assert_array_equal(workspace.FetchBlob("w"), w)
    np.testing.assert_array_equal(workspace.FetchBlob("it"), it)
    gone = core.CreateOperator("Load", [], [], db=str(tmp_path / "none"), load_all=1)
    with pytest.raises(UnsupportedConversion, match="must exist when the op is created"):
        workspace.RunOperatorOnce(gone)


def test_brew_takes_caffe2s_window_and_init_arguments():
    x = RNG.normal(size=(1, 2, 7, 7)).astype(np.float32)
    model = model_helper.ModelHelper(name="kw")
    brew.conv(model, "data", "c", 2, 3, kernel=3, pad_t=1, pad_b=0, pad_l=2, pad_r=0,
              stride_h=2, stride_w=1)  # fmt: skip
    brew.max_pool(model, "data", "p", kernel=2, stride=2, legacy_pad=3)
    brew.spatial_bn(model, "data", "bn", 2, init_scale=2.0, init_bias=0.5, is_test=True)
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob("data", x)
    workspace.RunNetOnce(model.net)
    w, b = workspace.FetchBlob("c_w"), workspace.FetchBlob("c_b")
    padded = np.pad(x, ((0, 0), (0, 0), (1, 0), (2, 0)))
    want = np.stack(
        [
            np.stack([np.tensordot(padded[0, :, i : i + 3, j : j + 3], w, ([0, 1, 2], [1, 2, 3]))
                      for j in range(padded.shape[3] - 2)], -1)
            for i in range(0, padded.shape[2] - 2, 2)
        ],
        1,
    )[None] + b[None, :, None, None]  # fmt: skip
    np.testing.assert_allclose(workspace.FetchBlob("c"), want, rtol=1e-5, atol=1e-5)
    # Caffe's legacy pooling rounds up: 7 -> 4 windows of 2, the last one partial
    pooled = workspace.FetchBlob("p")
    assert pooled.shape == (1, 2, 4, 4)
    np.testing.assert_array_equal(pooled[..., 3, 3], x[..., 6, 6])
    np.testing.assert_allclose(workspace.FetchBlob("bn"), x * 2 / np.sqrt(1 + 1e-5) + 0.5,
                               rtol=1e-5)  # fmt: skip


def test_lstm_carries_the_last_hidden_state_through_padded_steps():
    steps, batch, dim, hid = 4, 3, 3, 5
    model = model_helper.ModelHelper(name="lstm")
    hall, hlast, _, _ = rnn_cell.LSTM(model, "x", "len", ("h0", "c0"), dim, hid, scope="L")
    workspace.RunNetOnce(model.param_init_net)
    lengths = np.array([4, 2, 1], np.int32)
    feeds = {"x": RNG.normal(size=(steps, batch, dim)).astype(np.float32), "len": lengths,
             "h0": np.zeros((1, batch, hid), np.float32),
             "c0": np.zeros((1, batch, hid), np.float32)}  # fmt: skip
    for name, value in feeds.items():
        workspace.FeedBlob(name, value)
    workspace.RunNetOnce(model.net)
    hidden, last = workspace.FetchBlob(str(hall)), workspace.FetchBlob(str(hlast))
    for n, length in enumerate(lengths):
        for t in range(steps):
            want = hidden[min(t, length - 1), n]
            np.testing.assert_array_equal(hidden[t, n], want)
        np.testing.assert_array_equal(last[0, n], hidden[length - 1, n])
    assert not np.allclose(hidden[1, 0], hidden[0, 0])  # a full-length sequence moves on


def test_predictor_takes_a_list_in_input_order_and_names_stray_feeds():
    net = Net("two")
    net.add_external_input("a", "b")
    net.Sub(["a", "b"], "y")
    net.add_external_output("y")
    predictor = nb.Predictor(Net("init").proto(), net.proto())
    a, b = np.float32([5, 7]), np.float32([1, 2])
    np.testing.assert_array_equal(predictor.run([a, b])["y"], a - b)
    np.testing.assert_array_equal(predictor.run((a, b))["y"], a - b)
    with pytest.raises(FeedError, match=r"got 1 input array\(s\) in a list, expected 2: a, b"):
        predictor.run([a])
    with pytest.raises(FeedError, match="feeds must be a dict"):
        predictor.run(a)
    with pytest.raises(FeedError, match=r"missing input 'b' \(fed instead: 'bb'\)"):
        predictor.run({"a": a, "bb": b})


def test_feed_and_fetch_copy_as_caffe2_did():
    x = np.arange(3, dtype=np.float32)
    workspace.FeedBlob("x", x)
    x[0] = 9
    fetched = workspace.FetchBlob("x")
    np.testing.assert_array_equal(fetched, [0, 1, 2])
    fetched[1] = 7
    np.testing.assert_array_equal(workspace.FetchBlob("x"), [0, 1, 2])


def test_a_caffe2_op_with_too_few_inputs_says_so():
    with pytest.raises(UnsupportedConversion, match=r"Mul .*expected 2 inputs \(A, B\), got 1"):
        core.Net("bad").Mul(["x"], "y")


def test_relative_save_and_load_paths_lie_under_the_root_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    workspace.ResetWorkspace(str(root))
    assert workspace.RootFolder() == str(root)
    workspace.FeedBlob("w", np.arange(3, dtype=np.float32))
    net = core.Net("save")
    net.Save(["w"], [], db="ckpt.minidb", db_type="minidb")
    workspace.RunNetOnce(net)
    assert (root / "ckpt.minidb").exists() and not (tmp_path / "ckpt.minidb").exists()
    workspace.ResetWorkspace(str(root))
    load = core.CreateOperator("Load", [], ["w"], db="ckpt.minidb", db_type="minidb")
    workspace.RunOperatorOnce(load)
    np.testing.assert_array_equal(workspace.FetchBlob("w"), [0, 1, 2])
    workspace.ResetWorkspace()
    assert workspace.RootFolder() == "."
