"""Legacy Caffe2 models: the model zoo's SqueezeNet, each legacy spelling against a NumPy
reference of Caffe2's semantics, whole-file error reports, and the Caffe2 writer."""

import numpy as np
import pytest

from netbrew.cli import main
from netbrew.converters import caffe2
from netbrew.errors import ModelLoadError, UnsupportedConversion
from netbrew.executor import Predictor, Workspace
from netbrew.netdef import Net
from netbrew.proto.netbrew_pb2 import NetDef


def run_legacy(build, feeds, outputs):
    """Builds a legacy net with the Net API's raw add_op, loads it, runs it."""
    net = NetDef(name="legacy")
    build(net)
    net.external_input.extend(feeds)
    _, canonical = caffe2.load(NetDef(name="init"), net)
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(canonical)
    return [ws.fetch_blob(o) for o in outputs]


def legacy_op(net, op_type, inputs, outputs, **args):
    from netbrew.netdef import op_def

    net.op.append(op_def(op_type, inputs, outputs, **args))


def conv_nchw(x, w, stride=1, pad=(0, 0, 0, 0)):
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[2]), (pad[1], pad[3])))
    m, _, kh, kw = w.shape
    oh, ow = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], m, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride : i * stride + kh, j * stride : j * stride + kw]
            out[:, :, i, j] = np.tensordot(patch, w, axes=([1, 2, 3], [1, 2, 3]))
    return out


RNG = np.random.default_rng(0)


def test_conv_nhwc_with_caffe2_weight_layout_and_pad_tlbr():
    x = RNG.normal(size=(2, 5, 6, 3)).astype(np.float32)  # NHWC
    w = RNG.normal(size=(4, 3, 2, 3)).astype(np.float32)  # Caffe2 NHWC: [M, kH, kW, C]
    b = RNG.normal(size=4).astype(np.float32)

    def build(net):
        legacy_op(net, "Conv", ["x", "w", "b"], ["y"], kernel_h=3, kernel_w=2, stride=1,
                  pad_t=1, pad_l=0, pad_b=0, pad_r=1, order="NHWC")  # fmt: skip

    (y,) = run_legacy(build, {"x": x, "w": w, "b": b}, ["y"])
    ref = conv_nchw(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), pad=(1, 0, 0, 1))
    ref = (ref + b[None, :, None, None]).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def caffe_pool_size(size, k, s, p):
    out = int(np.ceil((size + 2 * p - k) / s)) + 1
    if p and (out - 1) * s >= size + p:
        out -= 1
    return out


@pytest.mark.parametrize("size,k,s,p", [(6, 3, 2, 1), (7, 3, 2, 0), (109, 3, 2, 0), (8, 2, 3, 1)])
def test_legacy_pad_uses_caffes_rounding(size, k, s, p):
    x = RNG.normal(size=(1, 2, size, size)).astype(np.float32)

    def build(net):
        legacy_op(net, "MaxPool", ["x"], ["y"], kernel=k, stride=s, pad=p, legacy_pad=3)
        legacy_op(net, "AveragePool", ["x"], ["a"], kernel=k, stride=s, pad=p, legacy_pad=3)

    y, a = run_legacy(build, {"x": x}, ["y", "a"])
    out = caffe_pool_size(size, k, s, p)
    assert y.shape == a.shape == (1, 2, out, out)
    padded = np.pad(x, ((0, 0), (0, 0), (p, p + s), (p, p + s)), constant_values=-np.inf)
    ref = np.empty((1, 2, out, out), np.float32)
    for i in range(out):
        for j in range(out):
            ref[:, :, i, j] = padded[:, :, i * s : i * s + k, j * s : j * s + k].max(axis=(2, 3))
    np.testing.assert_allclose(y, ref)


def test_nhwc_max_pool_and_global_pooling():
    x = RNG.normal(size=(2, 4, 4, 3)).astype(np.float32)

    def build(net):
        legacy_op(net, "MaxPool", ["x"], ["m"], kernel=2, stride=2, order="NHWC")
        legacy_op(net, "AveragePool", ["x"], ["g"], global_pooling=1, order="NHWC")

    m, g = run_legacy(build, {"x": x}, ["m", "g"])
    np.testing.assert_array_equal(m, x.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4)))
    np.testing.assert_allclose(g, x.mean(axis=(1, 2), keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide)])  # fmt: skip
def test_broadcast_with_axis(op, fn):
    a = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    b = RNG.uniform(1, 2, size=(3, 4)).astype(np.float32)

    def build(net):
        legacy_op(net, op, ["a", "b"], ["y"], broadcast=1, axis=1)
        legacy_op(net, op, ["a", "c"], ["z"], broadcast=1)  # suffix match, no axis

    y, z = run_legacy(build, {"a": a, "b": b, "c": b[0, :1].repeat(5)}, ["y", "z"])
    np.testing.assert_allclose(y, fn(a, b[None, :, :, None]), rtol=1e-6)
    np.testing.assert_allclose(z, fn(a, b[0, :1].repeat(5)), rtol=1e-6)


def test_concat_split_info_and_order():
    xs = [RNG.normal(size=(2, c, 3, 3)).astype(np.float32) for c in (2, 5)]

    def build(net):
        legacy_op(net, "Concat", ["x0", "x1"], ["y", "split"], order="NCHW")
        legacy_op(net, "Concat", ["h0", "h1"], ["yh", "split_h"], order="NHWC")

    hs = [x.transpose(0, 2, 3, 1) for x in xs]
    y, split, yh, split_h = run_legacy(
        build, {"x0": xs[0], "x1": xs[1], "h0": hs[0], "h1": hs[1]}, ["y", "split", "yh", "split_h"]
    )
    np.testing.assert_array_equal(y, np.concatenate(xs, axis=1))
    np.testing.assert_array_equal(yh, np.concatenate(hs, axis=3))
    assert split.dtype == np.int32 and split.tolist() == [2, 5] == split_h.tolist()


def test_reshape_old_shape_softmax_axis_fc_transposed_and_others():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    w = RNG.normal(size=(12, 5)).astype(np.float32)  # FCTransposed: [K, N]

    def build(net):
        legacy_op(net, "Reshape", ["x"], ["r", "old"], shape=[2, -1])
        legacy_op(net, "Softmax", ["x"], ["sm"], axis=1)  # Caffe2 flattens at axis 1
        legacy_op(net, "FCTransposed", ["x", "w", "b"], ["fc"])
        legacy_op(net, "Cast", ["x"], ["i"], to=2)  # Caffe2's INT32
        legacy_op(net, "Clip", ["x"], ["c"], min=-0.5, max=0.5)
        legacy_op(net, "ExpandDims", ["x"], ["e"], dims=[0, 2])
        legacy_op(net, "Squeeze", ["e"], ["s"], dims=[0, 2])
        legacy_op(net, "Transpose", ["x"], ["t"], axes=[2, 0, 1])
        legacy_op(net, "Dropout", ["x"], ["d", "mask"], is_test=1, ratio=0.3)

    feeds = {"x": x, "w": w, "b": np.zeros(5, np.float32)}
    r, old, sm, fc, i, c, e, s, t, d = run_legacy(
        build, feeds, ["r", "old", "sm", "fc", "i", "c", "e", "s", "t", "d"]
    )
    np.testing.assert_array_equal(r, x.reshape(2, 12))
    assert old.tolist() == [2, 3, 4]
    flat = np.exp(x.reshape(2, 12) - x.reshape(2, 12).max(1, keepdims=True))
    np.testing.assert_allclose(sm, (flat / flat.sum(1, keepdims=True)).reshape(2, 3, 4), rtol=1e-5)
    np.testing.assert_allclose(fc, x.reshape(2, 12) @ w, rtol=1e-5, atol=1e-5)
    assert i.dtype == np.int32 and np.array_equal(i, x.astype(np.int32))
    np.testing.assert_array_equal(c, np.clip(x, -0.5, 0.5))
    assert e.shape == (1, 2, 1, 3, 4) and s.shape == x.shape
    np.testing.assert_array_equal(t, x.transpose(2, 0, 1))
    np.testing.assert_array_equal(d, x)


def test_spatial_bn_nhwc_and_channel_shuffle():
    x = RNG.normal(size=(2, 3, 3, 4)).astype(np.float32)  # NHWC, C=4
    scale, bias = RNG.normal(size=4).astype(np.float32), RNG.normal(size=4).astype(np.float32)
    mean, var = RNG.normal(size=4).astype(np.float32), RNG.uniform(0.5, 2, 4).astype(np.float32)

    def build(net):
        legacy_op(net, "SpatialBN", ["x", "s", "b", "m", "v"], ["y"], is_test=1, epsilon=1e-3,
                  order="NHWC")  # fmt: skip
        legacy_op(net, "ChannelShuffle", ["xc"], ["cs"], group=2)

    xc = np.arange(2 * 4 * 2 * 2, dtype=np.float32).reshape(2, 4, 2, 2)
    y, cs = run_legacy(build, {"x": x, "s": scale, "b": bias, "m": mean, "v": var, "xc": xc},
                       ["y", "cs"])  # fmt: skip
    np.testing.assert_allclose(y, (x - mean) / np.sqrt(var + 1e-3) * scale + bias, rtol=1e-5)
    np.testing.assert_array_equal(cs, xc[:, [0, 2, 1, 3]])


def test_unsupported_ops_are_reported_together():
    net = NetDef(name="odd")
    for op_type in ("ImageInput", "Relu", "FancyOp", "FancyOp", "VideoInput"):
        legacy_op(net, op_type, ["x"], ["y"])
    legacy_op(net, "Conv", ["x", "w"], ["z"], kernel=3, weird_flag=1)
    with pytest.raises(UnsupportedConversion) as info:
        caffe2.load(NetDef(), net)
    text = str(info.value)
    assert "5 op(s) cannot be loaded" in text
    assert "FancyOp: no translation to netbrew's ops (x2)" in text
    assert "ImageInput: a data-reading layer: feed the data to the Predictor instead (x1)" in text
    assert "VideoInput: a data-reading layer" in text
    assert "Conv: argument(s) weird_flag not supported (x1)" in text


def test_corrupt_file(tmp_path):
    (tmp_path / "predict_net.pb").write_bytes(b"\x12\xff\xff\xff")
    with pytest.raises(ModelLoadError, match=r"predict_net\.pb: not a valid binary NetDef"):
        caffe2.load(NetDef(), tmp_path / "predict_net.pb")


def test_save_and_load_back_keep_every_name(tmp_path):
    net = NetDef(name="legacy")
    legacy_op(net, "Conv", ["data", "w"], ["conv/out"], kernel=1)
    legacy_op(net, "Relu", ["conv/out"], ["conv/out"])
    net.external_input.extend(["data", "w"])
    net.external_output.append("conv/out")
    init = Net("init")
    init.GivenTensorFill([], "w", shape=[2, 1, 1, 1], values=[1.0, -1.0])
    c_init, c_net = caffe2.load(init.proto(), net)
    caffe2.save(c_init, c_net, tmp_path)
    again_init, again_net = caffe2.load(tmp_path / "init_net.pb", tmp_path / "predict_net.pb")
    assert again_net == c_net and again_init.op == c_init.op
    blobs = {b for op in again_net.op for b in [*op.input, *op.output]}
    assert {"data", "w", "conv/out"} <= blobs


@pytest.fixture
def squeezenet(squeezenet_dir):
    init, predict = caffe2.load(squeezenet_dir / "init_net.pb", squeezenet_dir / "predict_net.pb")
    return squeezenet_dir, init, predict


def torch_squeezenet(weights, x):
    """SqueezeNet v1.0 written with torch ops, from the same weights (independent path)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}

    def conv(h, name, stride=1, pad=0):
        return F.relu(F.conv2d(h, t[f"{name}_w"], t[f"{name}_b"], stride=stride, padding=pad))

    h = conv(torch.from_numpy(x), "conv1", stride=2)
    h = F.max_pool2d(h, 3, 2, ceil_mode=True)
    for i in range(2, 10):
        s = conv(h, f"fire{i}/squeeze1x1")
        h = torch.cat([conv(s, f"fire{i}/expand1x1"), conv(s, f"fire{i}/expand3x3", pad=1)], 1)
        if i in (4, 8):  # SqueezeNet v1.0 pools after fire4 and fire8
            h = F.max_pool2d(h, 3, 2, ceil_mode=True)
    pad = int(t["conv10_w"].shape[-1] // 2)
    h = conv(h, "conv10", pad=1 if pad == 0 else pad)
    h = h.mean(dim=(2, 3), keepdim=True)
    return torch.softmax(h.flatten(1), dim=1).reshape(h.shape).numpy()


def test_squeezenet_matches_independent_torch_implementation(squeezenet):
    _, init, predict = squeezenet
    x = np.random.default_rng(0).uniform(0, 255, (1, 3, 224, 224)).astype(np.float32) - 128
    ours = Predictor(init, predict).run({"data": x})["prob"]
    ws = Workspace()
    ws.run_net_once(init)
    weights = {b: ws.fetch_blob(b) for b in ws.blobs() if b != "data"}
    ref = torch_squeezenet(weights, x)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, atol=1e-4)
    k = min(5, ours.size)
    top = np.argsort(-ours.reshape(-1))[:k]
    assert top.tolist() == np.argsort(-ref.reshape(-1))[:k].tolist()


def test_squeezenet_to_onnx_gives_the_same_numbers_in_onnxruntime(squeezenet):
    ort = pytest.importorskip("onnxruntime")
    from netbrew.converters.onnx import export

    _, init, predict = squeezenet
    x = np.random.default_rng(1).normal(size=(1, 3, 224, 224)).astype(np.float32)
    ours = Predictor(init, predict).run({"data": x})["prob"]
    model = export(predict, init, inputs={"data": (1, 3, 224, 224)}, opset=21)
    theirs = ort.InferenceSession(model.SerializeToString()).run(None, {"data": x})[0]
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_cli_on_caffe2_files(squeezenet, tmp_path, capsys):
    folder, _, _ = squeezenet
    args = [str(folder / "predict_net.pb"), "--init", str(folder / "init_net.pb")]
    assert main(["info", *args]) == 0
    assert "Conv" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 224, 224), np.float32))
    assert main(["run", *args, "--input", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path)]) == 0
    assert np.load(tmp_path / "prob.npy").sum() == pytest.approx(1.0, abs=1e-5)
    out = tmp_path / "sq.onnx"
    assert main(["convert", *args, "-o", str(out), "--input", "data=1x3x224x224"]) == 0
    assert out.exists()


def test_lrn_conv_transpose_adj_and_log_softmax():
    x = RNG.normal(size=(1, 5, 3, 3)).astype(np.float32)
    w = RNG.normal(size=(5, 2, 2, 2)).astype(np.float32)  # NCHW ConvTranspose: [C, M, kH, kW]

    def build(net):
        legacy_op(net, "LRN", ["x"], ["l", "scale"], size=3, alpha=0.3, beta=0.75, bias=2.0)
        legacy_op(net, "ConvTranspose", ["x", "w"], ["ct"], kernel=2, stride=2, adj=1)
        legacy_op(net, "LogSoftmax", ["x"], ["ls"], axis=2)

    lrn, ct, ls = run_legacy(build, {"x": x, "w": w}, ["l", "ct", "ls"])
    sq = np.pad(x**2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window = sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]
    np.testing.assert_allclose(lrn, x / (2.0 + 0.3 / 3 * window) ** 0.75, rtol=1e-5)
    assert ct.shape == (1, 2, 7, 7)  # (3 - 1) * 2 + 2 + adj 1
    ref = np.einsum("nchw,cmij->nmhiwj", x, w).reshape(1, 2, 6, 6)
    np.testing.assert_allclose(ct[:, :, :6, :6], ref, rtol=1e-4, atol=1e-5)
    rows = x.reshape(1 * 5, 9)
    ref_ls = rows - np.log(np.exp(rows).sum(1, keepdims=True))
    np.testing.assert_allclose(ls, ref_ls.reshape(x.shape), rtol=1e-5, atol=1e-6)


def test_text_format_files_load(tmp_path):
    from google.protobuf import text_format

    net = NetDef(name="t")
    legacy_op(net, "Softmax", ["x"], ["y"])
    net.external_input.append("x")
    (tmp_path / "predict_net.pbtxt").write_text(text_format.MessageToString(net))
    (tmp_path / "init_net.pbtxt").write_text('name: "init"')
    init, predict = caffe2.load(tmp_path / "init_net.pbtxt", tmp_path / "predict_net.pbtxt")
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    y = Predictor(init, predict).run({"x": x})["y"]
    np.testing.assert_allclose(y.sum(axis=1), 1, rtol=1e-6)
