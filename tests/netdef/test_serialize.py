"""save_net/load_net, save_blobs/load_blobs: formats, atomic writes and clear errors."""

import os

import numpy as np
import pytest

from netbrew.errors import ModelLoadError
from netbrew.netdef import Net, load_blobs, load_net, save_blobs, save_net
from netbrew.netdef.args import args_dict
from netbrew.netdef.tensor import to_array


def small_net():
    net = Net("small")
    net.add_external_input("x", "w")
    net.MatMul(["x", "w"], "y")
    net.add_external_output("y")
    return net


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
def test_round_trip(tmp_path, suffix):
    net = small_net()
    path = save_net(net, tmp_path / f"net{suffix}")
    assert load_net(path) == net.proto()


def test_text_format_is_text(tmp_path):
    path = save_net(small_net(), tmp_path / "net.pbtxt")
    assert 'type: "MatMul"' in path.read_text()


def test_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"unknown suffix '\.json'.*\.pb.*\.pbtxt"):
        save_net(small_net(), tmp_path / "net.json")


def test_squeezenet_parses_unchanged_and_resaves_byte_identical(squeezenet_dir, tmp_path):
    for name in ("predict_net.pb", "init_net.pb"):
        original = (squeezenet_dir / name).read_bytes()
        net = load_net(squeezenet_dir / name)
        assert net.SerializeToString() == original
        resaved = save_net(net, tmp_path / name).read_bytes()
        assert resaved == original


def test_squeezenet_content(squeezenet_dir):
    predict = load_net(squeezenet_dir / "predict_net.pb")
    init = load_net(squeezenet_dir / "init_net.pb")
    types = [op.type for op in predict.op]
    assert types[:3] == ["Conv", "Relu", "MaxPool"] and types[-1] == "Softmax"
    assert types.count("Conv") == 26 and types.count("Concat") == 8
    conv1 = args_dict(predict.op[0].arg)
    assert conv1 == {"stride": 2, "pad": 0, "kernel": 7}
    assert predict.op[0].input[:] == ["data", "conv1_w", "conv1_b"]
    fills = {op.output[0]: args_dict(op.arg) for op in init.op if op.type == "GivenTensorFill"}
    assert len(fills) == 52 and [op.type for op in init.op].count("ConstantFill") == 1
    assert fills["conv1_w"]["shape"] == [96, 3, 7, 7]
    assert len(fills["conv1_w"]["values"]) == 96 * 3 * 7 * 7
    total = sum(len(f["values"]) for f in fills.values())
    assert total == 736_963


def test_truncated_file(tmp_path, squeezenet_dir):
    path = tmp_path / "cut.pb"
    path.write_bytes((squeezenet_dir / "init_net.pb").read_bytes()[:5000])
    with pytest.raises(ModelLoadError, match=r"cut\.pb: not a valid binary NetDef.*truncated"):
        load_net(path)


def test_truncated_file_without_shared_data(tmp_path):
    path = tmp_path / "cut.pb"
    net = small_net()
    net.add_external_output("a_long_output_name")
    path.write_bytes(net.proto().SerializeToString()[:-3])
    with pytest.raises(ModelLoadError, match=r"cut\.pb: not a valid binary NetDef"):
        load_net(path)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.pb"
    path.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError, match=r"noise\.pb: not a (valid binary )?NetDef"):
        load_net(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"empty\.pb: file is empty, expected a NetDef"):
        load_net(path)


@pytest.mark.parametrize("name", ["empty.pbtxt", "blank.pbtxt", "blank.pb"])
def test_empty_or_blank_net_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"" if name.startswith("empty") else b" \n\t\n")
    with pytest.raises(ModelLoadError, match=name.replace(".", r"\.") + ": file is empty"):
        load_net(path)


@pytest.mark.parametrize("name", ["empty.pb", "empty.pbtxt"])
def test_empty_blobs_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    pattern = name.replace(".", r"\.") + ": file is empty, expected a TensorProtos"
    with pytest.raises(ModelLoadError, match=pattern):
        load_blobs(path)


def test_missing_file(tmp_path):
    with pytest.raises(ModelLoadError, match=r"nothere\.pb: no such file"):
        load_net(tmp_path / "nothere.pb")


def test_bad_text(tmp_path):
    path = tmp_path / "bad.pbtxt"
    path.write_text("op { type: 'Relu' \n bogus_field: 3 }")
    with pytest.raises(ModelLoadError, match=r"bad\.pbtxt: not a text-format NetDef.*bogus_field"):
        load_net(path)


def test_onnx_file_gets_a_hint(tmp_path):
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "model.pb"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    with pytest.raises(ModelLoadError, match="looks like an ONNX model"):
        load_net(path)


def test_write_is_atomic(tmp_path, monkeypatch):
    path = save_net(small_net(), tmp_path / "net.pb")
    before = path.read_bytes()

    def crash(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)
    bigger = small_net()
    bigger.Relu("y", "z")
    with pytest.raises(OSError, match="disk full"):
        save_net(bigger, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["net.pb"]


@pytest.mark.parametrize("suffix", [".pb", ".pbtxt"])
@pytest.mark.parametrize("raw", [False, True])
def test_blobs_round_trip(tmp_path, suffix, raw):
    blobs = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "ids": np.array([3, -1], dtype=np.int64),
        "mask": np.array([True, False]),
        "half": np.array([0.5], dtype=np.float16),
    }
    back = load_blobs(save_blobs(blobs, tmp_path / f"blobs{suffix}", raw=raw))
    assert list(back) == list(blobs)
    for name, value in blobs.items():
        assert back[name].dtype == value.dtype
        np.testing.assert_array_equal(back[name], value)


def test_load_blobs_rejects_netdef(tmp_path):
    net = small_net().proto()
    net.op[0].arg.add(name="t").t.CopyFrom(to_array.__globals__["from_array"](np.ones(2)))
    path = save_net(net, tmp_path / "net.pb")
    with pytest.raises(ModelLoadError, match=r"net\.pb: not a"):
        load_blobs(path)
