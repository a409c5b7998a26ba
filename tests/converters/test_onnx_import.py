"""ONNX -> NetDef: models exported by torch.onnx run in netbrew with PyTorch's numbers;
old opsets upgrade; external data loads relative to the model file; names survive."""

import io
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from netbrew.converters.onnx import backend, import_model
from netbrew.errors import ModelLoadError
from netbrew.executor import Predictor

torch = pytest.importorskip("torch")
nn = torch.nn


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, groups=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )  # fmt: skip
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return torch.softmax(self.head(torch.flatten(self.features(x), 1)), dim=1)


class Residual(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.bn1, self.bn2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.down = nn.Conv2d(c, 2 * c, 1, stride=2)
        self.fc = nn.Linear(2 * c, 4)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        z = self.down(torch.relu(x + y))
        return self.fc(z.mean(dim=(2, 3)))


class Attention(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads, self.d = heads, d
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)

        def split(z):
            return z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(q), split(k), split(v)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(x)


def to_onnx(module, example, opset=17):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module, (example,), buffer, dynamo=False, opset_version=opset,
            input_names=["input"], output_names=["output"],
        )  # fmt: skip
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize(
    "module,shape",
    [(SmallCNN, (2, 3, 16, 16)), (Residual, (2, 3, 8, 8)), (Attention, (2, 5, 16))],
    ids=["cnn", "residual", "attention"],
)
def test_torch_export_runs_in_netbrew(module, shape):
    torch.manual_seed(0)
    m = module().eval()
    for mod in m.modules():  # non-trivial running statistics
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = m(x).numpy()
    model = to_onnx(m, x)
    init, net = import_model(model)
    out = Predictor(init, net).run({"input": x.numpy()})["output"]
    np.testing.assert_allclose(out, expected, atol=1e-4, rtol=1e-4)
    state_names = set(m.state_dict())
    kept = {op.output[0] for op in init.op}
    # parameters that torch.onnx keeps as initializers keep their state_dict names
    assert kept & state_names


def test_opset7_model_is_upgraded():
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    graph = helper.make_graph(
        [node],
        "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    init, net = import_model(model)
    assert [op.type for op in net.op] != ["Upsample"]  # upgraded to Resize
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    y = Predictor(init, net).run({"x": x})["y"]
    np.testing.assert_array_equal(y, x.repeat(2, axis=2).repeat(2, axis=3))


def test_relu_opset6_and_value_info(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)])
    init, net = import_model(model)
    info = {v.name: v for v in net.value_info}["x"]
    assert list(info.dim_names) == ["batch", ""] and list(info.unknown_dims) == [0]
    out = Predictor(init, net).run({"x": np.array([[-1, 0, 2]], np.float32)})["y"]
    np.testing.assert_array_equal(out, [[0, 0, 2]])


def test_external_data_is_read_relative_to_the_model(tmp_path, monkeypatch):
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save_model(
        model, folder / "m.onnx", save_as_external_data=True, location="weights.bin",
        all_tensors_to_one_file=True, size_threshold=0,
    )  # fmt: skip
    assert (folder / "weights.bin").exists()
    monkeypatch.chdir(tmp_path)  # not the model's folder
    init, net = import_model(folder / "m.onnx")
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(Predictor(init, net).run({"x": x})["y"], x @ w)


def test_not_an_onnx_file(tmp_path):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x00\xffnot onnx")
    with pytest.raises(ModelLoadError, match=r"bad\.onnx: not a valid ONNX model"):
        import_model(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"empty\.onnx: empty file"):
        import_model(path)
    with pytest.raises(ModelLoadError, match=r"empty\.onnx: empty file"):
        backend.prepare(str(path))


def test_a_file_that_parses_to_no_model(tmp_path):
    path = tmp_path / "nothing.onnx"
    path.write_bytes(onnx.ModelProto(doc_string="only a comment").SerializeToString())
    with pytest.raises(ModelLoadError, match=r"nothing\.onnx: not an ONNX model"):
        import_model(path)


def test_backend_api():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    node = helper.make_node("Add", ["a", "b"], ["c"])
    out = backend.run_node(node, [np.ones(2, np.float32), np.full(2, 2, np.float32)])
    np.testing.assert_array_equal(out[0], [3, 3])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "ab"],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph)
    rep = backend.prepare(model)
    first = rep.run([np.ones(2, np.float32)] * 2)
    second = rep.run({"a": np.full(2, 3, np.float32), "b": np.ones(2, np.float32)})
    np.testing.assert_array_equal(first["c"], [2, 2])  # by name, after a later run
    np.testing.assert_array_equal(second["c"], [4, 4])
    np.testing.assert_array_equal(second[0], second["c"])
    out = backend.run_model(model, [np.ones(2, np.float32)] * 2)
    np.testing.assert_array_equal(out[0], [2, 2])


@pytest.mark.parametrize("net_type", ["simple", "dag"])
@pytest.mark.parametrize("optimize", [True, False])
def test_backend_prepare_runtime_and_passes_give_the_same_numbers(net_type, optimize):
    """A residual pair of Relu branches: prepared for the dag runtime (blob sharing then
    respects its parallel branches) or without the passes, the outputs are unchanged."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Neg", ["x"], ["b"]),
        helper.make_node("Mul", ["a", "a"], ["a2"]),
        helper.make_node("Exp", ["b"], ["b2"]),
        helper.make_node("Add", ["a2", "b2"], ["y"]),
    ]
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "g", info[:1], info[1:]))
    rep = backend.prepare(model, net_type=net_type, optimize=optimize)
    assert rep.runtime.net.type == net_type
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    for _ in range(3):
        np.testing.assert_allclose(rep.run([x])[0], np.maximum(x, 0) ** 2 + np.exp(-x), 1e-6)


def test_import_with_inferred_shapes(monkeypatch):
    T = TensorProto
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, ["n", 3, 5])],
        [helper.make_tensor_value_info("y", T.FLOAT, None)],
    )
    # the newest opset: no version conversion, which would infer the shapes on its own
    newest = onnx.defs.onnx_opset_version()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", newest)])
    _, plain = import_model(model, infer_shapes=False)
    assert [v.name for v in plain.value_info] == ["x", "y"]
    _, net = import_model(model)  # shapes are inferred by default
    infos = {v.name: v for v in net.value_info}
    assert list(infos["r"].dims)[1:] == [3, 5] and list(infos["r"].unknown_dims) == [0]
    assert list(infos["r"].dim_names)[0] == "n"

    def fails(_model):
        raise onnx.shape_inference.InferenceError("[ShapeInferenceError] made up")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fails)
    _, hinted = import_model(model, infer_shapes=True)  # the hint is skipped, not an error
    assert hinted == plain


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "resnet50"])
def test_every_entry_point_gets_the_same_net(name, tmp_path):
    """The light models build weights in the graph (ConstantOfShape...); import_model moves
    that work into the init net, so Predictor runs the net the backend runs."""
    from pathlib import Path

    import netbrew as nb
    from netbrew.converters.onnx import backend

    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    from netbrew.cli import main, resolve_model

    init, predict = import_model(path)
    assert not any(op.type == "ConstantOfShape" for op in predict.op)
    ours = [op.type for op in nb.Predictor(init, predict).predict_net.op]
    theirs = [c.op.type for c in backend.prepare(onnx.load(path)).runtime.ops]
    assert ours == theirs
    # `netbrew run model.onnx`, and `netbrew convert` to a folder followed by a run
    ran = [op.type for op in nb.Predictor(*resolve_model(str(path))).predict_net.op]
    assert ran == theirs
    folder = tmp_path / "converted"
    assert main(["convert", str(path), "-o", str(folder)]) == 0
    converted = [op.type for op in nb.Predictor(*resolve_model(str(folder))).predict_net.op]
    assert converted == theirs


def test_initializers_that_a_model_may_override_stay_inputs():
    T = TensorProto
    weight = helper.make_tensor("w", T.FLOAT, [2], [1.0, 2.0])
    graph = helper.make_graph(
        [helper.make_node("Neg", ["w"], ["nw"]), helper.make_node("Add", ["x", "nw"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2]),
         helper.make_tensor_value_info("w", T.FLOAT, [2])],
        [helper.make_tensor_value_info("y", T.FLOAT, [2])],
        [weight],
    )  # fmt: skip
    for ir_version, hoisted in ((3, True), (8, False)):  # from IR 4 on, w is a default input
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        model.ir_version = ir_version
        init, predict = import_model(model)
        assert any(op.type == "Neg" for op in init.op) == hoisted
        assert [op.type for op in predict.op] == (["Add"] if hoisted else ["Neg", "Add"])
