"""trace(): netbrew.nn Modules recorded as (init_net, predict_net), run in a Workspace."""

import copy
import warnings

import numpy as np
import pytest

from netbrew import nn
from netbrew.converters.module import trace
from netbrew.converters.module.trace import TracerWarning, TracingError, to_model_helper
from netbrew.executor import Workspace
from netbrew.netdef import args_dict, lint
from netbrew.nn import functional as F

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)


def run(init_net, predict_net, feeds, runs=1):
    """Runs init_net once and predict_net `runs` times; returns the workspace."""
    ws = Workspace()
    ws.run_net_once(init_net)
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.create_net(predict_net)
    ws.run_net(predict_net.name, num_iter=runs)
    return ws


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


class ResNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(8), BasicBlock(8))
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(8, 5)

    def forward(self, image):
        x = self.layer1(nn.MaxPool2d(2)(self.stem(image)))
        return self.fc(self.drop(F.flatten(self.pool(x), 1)))


class Mixer(nn.Module):
    """A transformer-ish block: embedding, layer norm, GELU MLP, softmax, two outputs."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.norm = nn.LayerNorm(16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU("tanh"), nn.Linear(32, 16))
        self.head = nn.ModuleDict({"logits": nn.Linear(16, 4), "gate": nn.Linear(16, 1)})

    def forward(self, tokens):
        h = self.embed(tokens)
        h = h + self.mlp(self.norm(h))
        return F.softmax(self.head["logits"](h), dim=-1), nn.Sigmoid()(self.head["gate"](h))


class Shapes(nn.Module):
    """Conv1d, ConvTranspose2d, pooling and flattening."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
        self.avg = nn.AvgPool2d(3, 2, 1)
        self.conv1d = nn.Conv1d(4, 2, 3, padding="same")
        self.act = nn.Tanh()

    def forward(self, x):
        y = self.avg(self.up(x))  # (N, 4, 8, 8)
        return self.act(self.conv1d(nn.Flatten(2)(y)))


def _eager_and_traced(module, x, names=None):
    expected = module(x)
    init_net, predict_net = trace(module, x, output_names=names)
    return expected, init_net, predict_net


@pytest.mark.parametrize(
    "build, x",
    [
        (ResNetish, IMAGES),
        (Shapes, IMAGES),
        (Mixer, RNG.integers(0, 20, (3, 7))),
    ],
    ids=["resnetish", "shapes", "mixer"],
)
def test_traced_net_matches_eager_module(build, x):
    nn.manual_seed(0)
    module = build().eval()
    expected = module(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    init_net, predict_net = trace(module, x)
    lint(predict_net)
    assert predict_net.external_input[0] == (
        "tokens" if build is Mixer else "x" if build is Shapes else "image"
    )
    ws = run(init_net, predict_net, {predict_net.external_input[0]: x})
    assert len(predict_net.external_output) == len(expected)
    for name, want in zip(predict_net.external_output, expected):
        np.testing.assert_allclose(ws.fetch_blob(name), want, rtol=1e-6, atol=1e-6)


def test_batch_size_stays_free():
    nn.manual_seed(0)
    module = ResNetish().eval()
    init_net, predict_net = trace(module, IMAGES)
    other = RNG.standard_normal((5, 3, 8, 8)).astype(np.float32)
    ws = run(init_net, predict_net, {"image": other})
    np.testing.assert_allclose(ws.fetch_blob("output"), module(other), rtol=1e-6, atol=1e-6)


def test_blob_names_follow_module_paths():
    nn.manual_seed(0)
    module = ResNetish().eval()
    init_net, predict_net = trace(module, IMAGES, input_names=["data"], output_names=["logits"])
    state = list(module.state_dict())
    assert "layer1.0.conv1.weight" in state and "stem.1.running_mean" in state
    assert [op.output[0] for op in init_net.op] == state
    assert list(predict_net.external_input) == ["data", *state]
    assert list(predict_net.external_output) == ["logits"]
    kinds = {op.output[0]: op.type for op in init_net.op}
    assert kinds["layer1.0.conv1.weight"] == "GivenTensorFill"
    assert kinds["layer1.0.bn1.num_batches_tracked"] == "GivenTensorInt64Fill"
    ops = {op.output[0]: op for op in predict_net.op}
    # op outputs are named after the module that issued them; a module made inside forward
    # (MaxPool2d here) and functional calls at the top level take the op type's name
    assert list(ops["stem.0"].input) == ["data", "stem.0.weight", "stem.0.bias"]
    assert ops["maxpool"].type == "MaxPool" and list(ops["maxpool"].input) == ["stem.2"]
    assert list(ops["layer1.0.conv1"].input) == ["maxpool", "layer1.0.conv1.weight"]
    assert list(ops["layer1.0_1"].input) == ["layer1.0.bn2", "maxpool"]  # the skip Add
    assert ops["flatten"].type == "Flatten"
    assert ops["logits"].type == "Gemm" and list(ops["logits"].input) == [
        "drop",
        "fc.weight",
        "fc.bias",
    ]
    ws = Workspace()
    ws.run_net_once(init_net)
    for key, value in module.state_dict().items():
        np.testing.assert_array_equal(ws.fetch_blob(key), value)
        assert ws.fetch_blob(key).dtype == value.dtype


def test_train_and_eval_trace_differently():
    nn.manual_seed(0)
    module = ResNetish()
    _, train_net = trace(module.train(), IMAGES)
    _, eval_net = trace(module.eval(), IMAGES)

    def ops_of(net, op_type):
        return [op for op in net.op if op.type == op_type]

    assert all(
        args_dict(op.arg)["training_mode"] == 1 for op in ops_of(train_net, "BatchNormalization")
    )
    assert all(
        args_dict(op.arg)["training_mode"] == 0 for op in ops_of(eval_net, "BatchNormalization")
    )
    (train_drop,) = ops_of(train_net, "Dropout")
    (eval_drop,) = ops_of(eval_net, "Dropout")
    assert len(train_drop.input) == 3 and len(train_drop.output) == 2  # ratio, mode; mask
    assert list(train_drop.input[1:]) == ["drop.ratio", "drop.training_mode"]
    assert len(eval_drop.input) == 1 and len(eval_drop.output) == 1
    bn = next(
        op for op in ops_of(train_net, "BatchNormalization") if op.input[1] == "stem.1.weight"
    )
    assert bn.output[1] == "stem.1.running_mean"  # running statistics written in place
    written = {b for op in train_net.op for b in op.output}
    assert {"stem.1.running_var", "stem.1.num_batches_tracked"} <= written
    assert not {b for op in eval_net.op for b in op.output} & set(eval_net.external_input)


def test_traced_dropout_is_seeded_from_manual_seed():
    module = nn.Sequential(nn.Dropout(0.5))
    x = np.ones((50, 40), np.float32)
    outputs = []
    for _ in range(2):
        nn.manual_seed(7)
        init_net, predict_net = trace(module, x)
        (drop,) = predict_net.op
        assert isinstance(args_dict(drop.arg)["seed"], int)
        outputs.append(run(init_net, predict_net, {"input": x}).fetch_blob("output"))
    np.testing.assert_array_equal(outputs[0], outputs[1])
    kept = outputs[0] != 0
    assert 0.4 < kept.mean() < 0.6 and np.all(outputs[0][kept] == 2.0)


def test_training_net_updates_buffers_like_eager_steps():
    nn.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4, momentum=0.3), nn.ReLU())
    module.train()
    before = copy.deepcopy(module.state_dict())
    init_net, predict_net = trace(module, IMAGES)
    for key, value in module.state_dict().items():  # tracing changed nothing
        np.testing.assert_array_equal(value, before[key])
    eager = copy.deepcopy(module)
    ws = Workspace()
    ws.run_net_once(init_net)
    ws.create_net(predict_net)
    for step in range(3):
        x = (IMAGES * (step + 1)).astype(np.float32)
        ws.feed_blob("input", x)
        ws.run_net(predict_net.name)
        np.testing.assert_allclose(ws.fetch_blob("output"), eager(x), rtol=1e-6, atol=1e-6)
    for key, value in eager.state_dict().items():
        np.testing.assert_allclose(ws.fetch_blob(key), value, rtol=1e-6, atol=1e-7)
    assert int(ws.fetch_blob("1.num_batches_tracked")) == 3


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            return F.relu(self.fc(x))
        return -self.fc(x)


def test_data_dependent_control_flow_is_frozen():
    nn.manual_seed(0)
    module = Branchy()
    positive = np.abs(RNG.standard_normal((2, 4))).astype(np.float32)
    negative = -positive
    with pytest.warns(TracerWarning, match="bool.*branch seen while tracing"):
        init_net, predict_net = trace(module, positive)
    assert [op.type for op in predict_net.op] == ["Gemm", "Relu"]  # the condition's ops dropped
    ws = run(init_net, predict_net, {"x": negative})
    eager = module(negative)
    np.testing.assert_allclose(eager, -module.fc(negative))  # eager takes the other branch
    np.testing.assert_allclose(ws.fetch_blob("output"), F.relu(module.fc(negative)), atol=1e-6)
    assert not np.allclose(ws.fetch_blob("output"), eager)


class Normalizer(nn.Module):
    def forward(self, x):
        peak = float(x.max())  # evaluated on the example, baked as a constant
        return x / peak


def test_python_numbers_are_taken_from_the_example():
    x = np.array([[1.0, 4.0]], np.float32)
    with pytest.warns(TracerWarning, match="Python float"):
        init_net, predict_net = trace(Normalizer(), x)
    assert "ReduceMax" not in [op.type for op in predict_net.op]
    new = np.array([[2.0, 10.0]], np.float32)
    ws = run(init_net, predict_net, {"x": new})
    np.testing.assert_allclose(ws.fetch_blob("output"), new / 4.0)  # not new / 10
    np.testing.assert_allclose(Normalizer()(new), new / 10.0)


class ArrayCode(nn.Module):
    """NumPy-style code: operators, indexing and ndarray methods on its inputs."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(RNG.standard_normal((5, 3)))

    def forward(self, x, y):
        a = (x + 1) * 2 - x / 3 + 0.5 ** x.astype(np.float32) + (-x) ** 2
        b = x @ self.w + y[:, ::-1]  # (4, 3)
        c = b.T.reshape(2, -1).transpose(1, 0)  # (6, 2)
        d = a[1:3, ::2].sum(axis=1, keepdims=True) + a.mean() - a.max(axis=0)[0]
        e = (b > 0).astype(np.float32) * b + abs(x[..., 0:1]).min()
        f = 1 / (2.0 + x[0]) + x[-1] / 2 + b.argmax(axis=1).astype(np.float32).sum()
        return a, c, d, e, f, b.flatten()[::5], x.squeeze()[y.shape[0] - 1]


class UfuncCode(nn.Module):
    def forward(self, x):
        shift = np.arange(5, dtype=np.float32)
        y = np.exp(-np.abs(x)) + np.sqrt(x * x) * shift - np.maximum(x, 0.25)
        return np.tanh(y) / np.float32(3) + np.floor(x) * np.sign(x) + np.sin(x) ** 2


def test_numpy_ufuncs_record_their_ops():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    module = UfuncCode()
    init_net, predict_net = trace(module, x)
    assert {"Exp", "Abs", "Sqrt", "Max", "Tanh", "Floor", "Sign", "Sin"} <= {
        op.type for op in predict_net.op
    }
    ws = run(init_net, predict_net, {"x": -x})
    np.testing.assert_allclose(ws.fetch_blob("output"), module(-x), rtol=1e-6, atol=1e-6)


def test_numpy_style_code_records_the_same_computation():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    y = RNG.standard_normal((4, 3)).astype(np.float32)
    module = ArrayCode()
    expected = module(x, y)
    init_net, predict_net = trace(module, (x, y))
    lint(predict_net)
    assert list(predict_net.external_input[:3]) == ["x", "y", "w"]
    ws = run(init_net, predict_net, {"x": x, "y": y})
    for name, want in zip(predict_net.external_output, expected):
        got = ws.fetch_blob(name)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


class Odd(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("calls", np.zeros((), np.int64))

    def forward(self, x):
        self.calls = self.calls + 1  # a buffer reassigned in forward is written by the net
        h = self.fc(x)
        h2 = self.fc(h)  # a module used twice: one set of parameters, two ops
        return x, h2, h2, np.float32(3.0)


def test_outputs_that_are_inputs_repeats_or_constants():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    module = Odd()
    init_net, predict_net = trace(module, x, output_names=["same", "h", "h_again", "three"])
    # state_dict order (a module's own buffers before its children), then the constants
    assert [op.output[0] for op in init_net.op] == [
        "calls",
        "fc.weight",
        "fc.bias",
        "const",
        "const_1",
    ]
    assert [op.type for op in predict_net.op].count("Gemm") == 2
    ws = run(init_net, predict_net, {"x": x}, runs=2)
    np.testing.assert_array_equal(ws.fetch_blob("same"), x)
    want = module.fc(module.fc(x))
    np.testing.assert_allclose(ws.fetch_blob("h"), want, rtol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("h_again"), want, rtol=1e-6)
    assert ws.fetch_blob("three") == 3.0
    assert int(ws.fetch_blob("calls")) == 2 and int(module.calls) == 0


def test_to_model_helper_tags_parameters():
    nn.manual_seed(0)
    module = ResNetish()
    module.fc.weight.requires_grad = False
    init_net, predict_net = trace(module.train(), IMAGES)
    model = to_model_helper(module, init_net, predict_net)
    trainable = model.get_trainable_params()
    assert "stem.0.weight" in trainable and "fc.bias" in trainable
    assert "fc.weight" not in trainable and "stem.1.running_mean" not in trainable
    bns = [path for path, m in module.named_modules() if isinstance(m, nn.BatchNorm2d)]
    per_bn = [f"{p}.{c}" for p in bns for c in ("const", "var_correction", "var_decay")]
    assert sorted(model.constants) == sorted(["drop.ratio", "drop.training_mode", *per_bn])
    assert model.param_shapes["stem.0.weight"] == (8, 3, 3, 3)


def test_errors_name_the_problem():
    x = RNG.standard_normal((2, 3)).astype(np.float32)

    class UsesAsarray(nn.Module):
        def forward(self, x):
            return np.asarray(x) * 2

    with pytest.raises(TypeError, match="cannot become a NumPy array.*netbrew.nn.functional"):
        trace(UsesAsarray(), x)

    class UsesArctan2(nn.Module):
        def forward(self, x):
            return np.arctan2(x, x)

    with pytest.raises(TypeError, match="np.arctan2 .* cannot be recorded.*exp"):
        trace(UsesArctan2(), x)

    class ReturnsDict(nn.Module):
        def forward(self, x):
            return {"y": x}

    with pytest.raises(TracingError, match="returned a dict"):
        trace(ReturnsDict(), x)

    class Writes(nn.Module):
        def forward(self, x):
            x[0] = 1.0
            return x

    with pytest.raises(TracingError, match="item assignment"):
        trace(Writes(), x)

    class Hidden(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(3, 3)]  # a plain list: not registered

        def forward(self, x):
            return self.layers[0](x)

    with pytest.raises(TracingError, match="not a parameter or buffer.*ModuleList"):
        trace(Hidden(), x)
    with pytest.raises(ValueError, match="2 input names for 1 example inputs"):
        trace(nn.ReLU(), x, input_names=["a", "b"])
    with pytest.raises(ValueError, match="given twice"):
        trace(nn.ReLU(), x, input_names=["a"], output_names=["a"])
    with pytest.raises(TypeError, match="trace takes NumPy arrays"):
        trace(nn.ReLU(), [[1.0, 2.0]])


def test_tracing_leaves_no_tracer_behind():
    module = Branchy()
    x = np.ones((1, 4), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TracerWarning)
        trace(module, x)
    y = module(x)  # eager again
    assert isinstance(y, np.ndarray)
    with pytest.raises(ValueError, match="inner dims 2 and 3 differ"):
        trace(nn.Sequential(nn.Linear(4, 2), nn.Linear(3, 1)), x)
    assert isinstance(module(x), np.ndarray)


def test_exported_to_onnx_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from netbrew.converters.onnx import export

    nn.manual_seed(0)
    module = ResNetish().eval()
    init_net, predict_net = trace(module, IMAGES)
    model = export(predict_net, init_net, inputs={"image": IMAGES}, opset=21)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"image": IMAGES})
    np.testing.assert_allclose(got, module(IMAGES), rtol=1e-4, atol=1e-5)
