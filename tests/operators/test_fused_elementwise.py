"""FusedElementwise against NumPy written here and against its steps run one by one."""

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from netbrew import jit
from netbrew.converters.onnx.to_onnx import CONVERTERS
from netbrew.errors import OperatorError, SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import lint_problems, op_def
from netbrew.operators import GRADIENTS
from netbrew.operators.fused_elementwise import expand, fuse_chain
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import rand


def _sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


# (steps as (type, inputs, attrs) writing t0, t1, ...; extra input shapes; NumPy reference)
CHAINS = {
    "add_relu_mul_tanh": (
        [("Add", ["x", "b"], {}), ("Relu", ["t0"], {}), ("Mul", ["t1", "s"], {})]
        + [("Tanh", ["t2"], {})],
        {"b": (4, 1), "s": (5,)},
        lambda x, b, s: np.tanh(np.maximum(x + b, 0) * s),
    ),
    "swapped_sub_div": (
        [("Sub", ["c", "x"], {}), ("Div", ["c", "t0"], {}), ("Neg", ["t1"], {})],
        {"c": (1, 5)},
        lambda x, c: -(c / (c - x)),
    ),
    "sigmoid_leaky_clip": (
        [("Sigmoid", ["x"], {}), ("Sub", ["t0", "h"], {}), ("LeakyRelu", ["t1"], {"alpha": 0.2})]
        + [("Clip", ["t2", "lo", "hi"], {})],
        {"h": (), "lo": (), "hi": ()},
        lambda x, h, lo, hi: np.clip(
            np.where(_sigmoid(x) - h >= 0, _sigmoid(x) - h, 0.2 * (_sigmoid(x) - h)), lo, hi
        ),
    ),
    "swish_square_exp": (
        [("Sigmoid", ["x"], {}), ("Mul", ["x", "t0"], {}), ("Mul", ["t1", "t1"], {})]
        + [("Sqrt", ["t2"], {}), ("Exp", ["t3"], {}), ("Log", ["t4"], {})],
        {},
        lambda x: np.abs(x * _sigmoid(x)),
    ),
    "broadcast_grows": (
        [("Abs", ["x"], {}), ("Add", ["t0", "w"], {}), ("HardSigmoid", ["t1"], {})]
        + [("Reciprocal", ["t2"], {}), ("Clip", ["t3", "", "hi"], {})],
        {"w": (2, 1, 1, 1), "hi": ()},
        lambda x, w, hi: np.minimum(1 / np.clip((np.abs(x) + w) * 0.2 + 0.5, 0, 1), hi),
    ),
    "sum_max_min": (
        [("Sum", ["x", "b"], {}), ("Max", ["t0", "lo"], {}), ("Min", ["hi", "t1"], {})],
        {"b": (5,), "lo": (), "hi": ()},
        lambda x, b, lo, hi: np.minimum(hi, np.maximum(x + b, lo)),
    ),
}
EXTRA = {"lo": -0.3, "hi": 1.2, "h": 0.5, "c": 3.0}  # constant inputs


def _feeds(extra, dtype, x_shape=(3, 4, 5)):
    feeds = {"x": rand(*x_shape, dtype=dtype, seed=1, low=-2, high=2)}
    for k, (name, shape) in enumerate(extra.items()):
        if name in EXTRA:
            feeds[name] = np.full(shape, EXTRA[name], dtype)
        else:
            feeds[name] = rand(*shape, dtype=dtype, seed=k + 2, low=0.5, high=2)
    return feeds


def _steps(spec):
    return [op_def(t, ins, [f"t{k}"], **attrs) for k, (t, ins, attrs) in enumerate(spec)]


def _run(ops, feeds, output):
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    for op in ops:
        ws.run_operator_once(op)
    return ws.fetch_blob(output)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_chain_matches_numpy_and_the_unfused_ops(chain, dtype):
    spec, extra, reference = CHAINS[chain]
    feeds = _feeds(extra, dtype)
    steps = _steps(spec)
    fused = fuse_chain(steps)
    assert fused.type == "FusedElementwise" and fused.output[0] == steps[-1].output[0]
    copies = {k: v.copy() for k, v in feeds.items()}
    compiled = _run([fused], feeds, fused.output[0])  # the numba loop, where it runs
    with jit.disabled():
        got = _run([fused], feeds, fused.output[0])
    for name, value in copies.items():  # the chain's buffer is its own, never an input
        np.testing.assert_array_equal(feeds[name], value)
    unfused = _run(steps, feeds, steps[-1].output[0])
    assert got.dtype == unfused.dtype == dtype and got.shape == unfused.shape
    np.testing.assert_array_equal(got, unfused)  # same arithmetic, same order
    assert compiled.dtype == dtype and compiled.shape == got.shape
    # the loop's exp, log and tanh are LLVM's: equal to rounding, not bit for bit
    eps = 4 * np.finfo(dtype).eps  # values are O(1): ulps of exp cancel in Sub
    np.testing.assert_allclose(compiled, got, rtol=eps, atol=eps)
    args = [feeds[n] for n in feeds if n in {i for _, ins, _ in spec for i in ins}]
    expected = reference(*args).astype(np.float64)
    tol = 2e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_chain_takes_the_op_kernels(dtype):
    steps = _steps(
        [("Add", ["x", "b"], {}), ("Div", ["t0", "d"], {}), ("Relu", ["t1"], {})]
        + [("Neg", ["t2"], {}), ("Abs", ["t3"], {}), ("Mul", ["t4", "b"], {})]
    )
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.integers(-50, 50, (4, 6)).astype(dtype),
        "b": rng.integers(-3, 4, (6,)).astype(dtype),
        "d": np.array([3, -2, 5, 7, -4, 1], dtype),
    }
    got = _run([fuse_chain(steps)], feeds, "t5")
    x, b, d = (feeds[k] for k in "xbd")
    expected = np.abs(-np.maximum(np.trunc((x + b) / d), 0)) * b  # Div truncates to zero
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected.astype(dtype))


def test_in_place_chain_and_repeated_input():
    steps = [op_def("Relu", ["x"], ["x"]), op_def("Mul", ["x", "x"], ["x"])]
    fused = fuse_chain(steps)
    assert list(fused.input) == ["x"] and list(fused.output) == ["x"]
    x = rand(2, 3, seed=4)
    np.testing.assert_array_equal(_run([fused], {"x": x}, "x"), np.maximum(x, 0) ** 2)


def test_step_errors_name_the_step():
    fused = fuse_chain(_steps([("Relu", ["x"], {}), ("Add", ["t0", "b"], {})]))
    feeds = {"x": rand(2, 3), "b": rand(3, dtype=np.float64)}
    with pytest.raises(OperatorError, match=r"step 1 \(Add\).*'B' has dtype float64"):
        _run([fused], feeds, "t1")
    feeds["b"] = rand(4)
    with pytest.raises(OperatorError, match=r"step 1 \(Add\).*cannot be broadcast"):
        _run([fused], feeds, "t1")
    clip = fuse_chain(_steps([("Relu", ["x"], {}), ("Clip", ["t0", "lo"], {})]))
    with pytest.raises(OperatorError, match=r"step 1 \(Clip\).*expected a scalar"):
        _run([clip], {"x": rand(2, 3), "lo": rand(2)}, "t1")


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({"ops": ["Relu", "Pow"], "slots": [0, -1, 0]}, "'Pow' cannot be fused"),
        ({"ops": ["Relu", "Add"], "slots": [0, -1]}, "'slots' has 2 entries.*need 3"),
        ({"ops": ["Relu"], "slots": [-1]}, "step 0 \\(Relu\\) has slot -1"),
        ({"ops": ["Relu", "Add"], "slots": [0, -1, 5]}, "has slot 5"),
        ({"ops": ["LeakyRelu"], "slots": [0], "params": [0.1, 0.2]}, "'params' has 2"),
    ],
)
def test_malformed_chains_are_refused(attrs, match):
    op = op_def("FusedElementwise", ["x", "b"], ["y"], **attrs)
    with pytest.raises(OperatorError, match=match):
        _run([op], {"x": rand(2), "b": rand(2)}, "y")


def test_unfusible_steps_are_refused():
    with pytest.raises(SchemaError, match="step 1 \\(Softmax\\)"):
        fuse_chain([op_def("Relu", ["x"], ["t"]), op_def("Softmax", ["t"], ["y"])])
    with pytest.raises(SchemaError, match="step 1 \\(Relu\\)"):  # does not read step 0
        fuse_chain([op_def("Relu", ["x"], ["t"]), op_def("Relu", ["x"], ["y"])])


def test_gradient_and_export_gives_back_the_original_nodes():
    assert callable(GRADIENTS["FusedElementwise"])  # checked in test_fused_grad.py
    spec, extra, _ = CHAINS["sigmoid_leaky_clip"]
    steps = _steps(spec)
    steps[1].name = "sub1"
    fused = fuse_chain(steps, blobs=["t0", "t1", "t2"])
    assert [(s.type, list(s.input), list(s.output)) for s in expand(fused)] == [
        (s.type, list(s.input), list(s.output)) for s in steps
    ]
    nodes = CONVERTERS["FusedElementwise"](fused).nodes
    assert [n.op_type for n in nodes] == ["Sigmoid", "Sub", "LeakyRelu", "Clip"]
    assert nodes[1].name == "sub1"
    assert helper.get_attribute_value(nodes[2].attribute[0]) == pytest.approx(0.2)
    feeds = _feeds(extra, np.float32)
    graph = helper.make_graph(
        nodes,
        "chain",
        [
            helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, v.shape)
            for n, v in feeds.items()
        ],
        [helper.make_tensor_value_info("t3", onnx.TensorProto.FLOAT, feeds["x"].shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    (ref,) = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(_run([fused], feeds, "t3"), ref, rtol=1e-6, atol=1e-6)


def test_export_invents_names_that_would_clash():
    fused = fuse_chain([op_def("Relu", ["x"], ["x"]), op_def("Tanh", ["x"], ["x"])], ["x"])
    (relu, tanh) = expand(fused)
    assert list(relu.input) == ["x"] and list(relu.output) == ["x__step0"]
    assert list(tanh.input) == ["x__step0"] and list(tanh.output) == ["x"]


def test_default_attributes_stay_defaults():
    steps = [op_def("LeakyRelu", ["x"], ["t"]), op_def("HardSigmoid", ["t"], ["y"], beta=0.25)]
    fused = fuse_chain(steps)
    relu, hard = expand(fused)
    assert not relu.arg and [a.name for a in hard.arg] == ["beta"]
    x = rand(3, 4, dtype=np.float64, seed=5)  # alpha=0.01 as a double, as LeakyRelu has it
    np.testing.assert_array_equal(_run([fused], {"x": x}, "y"), _run(steps, {"x": x}, "y"))
    expected = np.clip(np.where(x >= 0, x, 0.01 * x) * 0.2 + 0.25, 0, 1)
    np.testing.assert_allclose(_run([fused], {"x": x}, "y"), expected, rtol=1e-12)


def test_chain_written_over_one_of_its_inputs_lints_clean():
    steps = [op_def("Neg", ["x"], ["t"]), op_def("Sub", ["b", "t"], ["b"])]  # b in place
    fused = fuse_chain(steps)
    assert list(fused.input) == ["b", "x"] and list(fused.output) == ["b"]
    net = NetDef(name="n", external_input=["x", "b"], external_output=["b"])
    net.op.extend([fused])
    assert lint_problems(net) == []
    feeds = {"x": rand(3, seed=1), "b": rand(3, seed=2)}
    np.testing.assert_array_equal(_run([fused], feeds, "b"), feeds["b"] + feeds["x"])
