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
from netbrew.netdef.args import args_dict, make_arg
from netbrew.operators import GRADIENTS
from netbrew.operators.fused_elementwise import RUNNING, expand, fuse_chain, fuse_steps
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
    """Runs `ops` on `feeds`; the blob `output`, or a list of blobs for a list."""
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    for op in ops:
        ws.run_operator_once(op)
    if isinstance(output, list):
        return [ws.fetch_blob(o) for o in output]
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


# -- DAGs: steps reading any earlier step, several outputs ----------------------------------

# (steps as (type, inputs, output), the fused op's outputs, input shapes)
DAGS = {
    "lstm_cell": (
        [
            ("Sigmoid", ["a0"], "i"),
            ("Add", ["a1", "one"], "a1b"),
            ("Sigmoid", ["a1b"], "f"),
            ("Tanh", ["a2"], "g"),
            ("Sigmoid", ["a3"], "o"),
            ("Mul", ["f", "c"], "fc"),
            ("Mul", ["i", "g"], "ig"),
            ("Add", ["fc", "ig"], "c2"),
            ("Tanh", ["c2"], "tc"),
            ("Mul", ["o", "tc"], "h2"),
        ],
        ["h2", "c2"],
        {"a0": (3, 5), "a1": (3, 5), "a2": (3, 5), "a3": (3, 5), "one": (), "c": (3, 5)},
    ),
    "diamond_broadcast_grows": (  # t read by two steps; Y grows past the first step's shape
        [
            ("Exp", ["x"], "t"),
            ("Mul", ["t", "w"], "u"),
            ("Relu", ["t"], "v"),
            ("Sub", ["u", "v"], "y"),
            ("Clip", ["y", "lo"], "z"),
        ],
        ["z"],
        {"x": (4, 1), "w": (1, 6), "lo": ()},
    ),
    "outputs_of_two_shapes": (  # s stays (4, 1): the NumPy kernel runs
        [("Sigmoid", ["x"], "s"), ("Mul", ["s", "w"], "y"), ("Max", ["y", "s"], "m")],
        ["s", "m"],
        {"x": (4, 1), "w": (4, 3)},
    ),
}


def _dag(name, dtype=np.float32):
    spec, outs, shapes = DAGS[name]
    steps = [op_def(t, ins, [out]) for t, ins, out in spec]
    written = [s.output[0] for s in steps]
    fused = fuse_steps(steps, outputs=[written.index(o) for o in outs])
    feeds = {n: rand(*shape, dtype=dtype, seed=k, low=-2, high=2)
             for k, (n, shape) in enumerate(shapes.items())}  # fmt: skip
    feeds.update({n: np.full(shapes[n], v, dtype) for n, v in {"one": 1.0, "lo": -0.5}.items()
                  if n in shapes})  # fmt: skip
    return steps, fused, feeds, outs


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("name", sorted(DAGS))
def test_dag_matches_the_unfused_ops(name, dtype):
    steps, fused, feeds, outs = _dag(name, dtype)
    assert sorted(fused.output) == sorted(outs)
    copies = {k: v.copy() for k, v in feeds.items()}
    compiled = _run([fused], feeds, outs)
    with jit.disabled():
        got = _run([fused], feeds, outs)
    for k, v in copies.items():  # buffers reused between steps are the kernel's own
        np.testing.assert_array_equal(feeds[k], v)
    unfused = _run(steps, feeds, outs)
    eps = 4 * np.finfo(dtype).eps
    for g, c, u in zip(got, compiled, unfused):
        assert g.dtype == c.dtype == u.dtype == dtype and g.shape == c.shape == u.shape
        np.testing.assert_array_equal(g, u)
        np.testing.assert_allclose(c, g, rtol=eps, atol=eps)
    assert not any(np.shares_memory(a, b) for a in compiled for b in compiled if a is not b)


def test_dag_slot_codes_and_results():
    _, fused, _, _ = _dag("lstm_cell")
    given = args_dict(fused.arg)
    assert list(given["results"]) == [9, 7] and list(fused.output) == ["h2", "c2"]
    slots = list(given["slots"])
    # Mul(f, c) reads step 2 (not the previous one), Mul(i, g) steps 0 and 3, Add(fc, ig)
    # steps 5 and 6 (the previous one), Tanh step 7, Mul(o, tc) steps 4 and 8
    assert slots[6:10] == [-5, list(fused.input).index("c"), -3, -6]
    assert slots[10:] == [-8, RUNNING, RUNNING, -7, RUNNING]
    chain = fuse_chain(_steps(CHAINS["add_relu_mul_tanh"][0]))
    assert "results" not in args_dict(chain.arg)  # a chain keeps the old encoding


@pytest.mark.parametrize(
    "attrs, n_out, match",
    [
        ({"ops": ["Relu", "Neg"], "slots": [0, -4]}, 1, r"step 1 \(Neg\) has slot -4"),
        ({"ops": ["Relu"], "slots": [-3]}, 1, r"step 0 \(Relu\) has slot -3"),
        ({"ops": ["Relu", "Neg"], "slots": [0, -3], "results": [0, 2]}, 2, "'results'"),
        ({"ops": ["Relu", "Neg"], "slots": [0, -3], "results": [1, 1]}, 2, "'results'"),
        ({"ops": ["Relu", "Neg"], "slots": [0, -3], "results": [0, 1]}, 1, "1 outputs"),
    ],
)
def test_malformed_dags_are_refused(attrs, n_out, match):
    outputs = ["y", "z"][:n_out]
    op = op_def("FusedElementwise", ["x"], outputs, **attrs)
    with pytest.raises((OperatorError, SchemaError), match=match):
        _run([op], {"x": rand(2)}, outputs)
        expand(op)


def test_fuse_steps_refuses_what_one_op_cannot_write():
    relu, neg = op_def("Relu", ["x"], ["x"]), op_def("Neg", ["b"], ["b"])
    with pytest.raises(SchemaError, match="written over inputs in place"):
        fuse_steps([op_def("Abs", ["x"], ["t"]), op_def("Abs", ["b"], ["u"]), relu, neg],
                   reads=[[None], [None], [None], [None]], outputs=[2, 3])  # fmt: skip
    with pytest.raises(SchemaError, match=r"step 0 \(Relu\) reads step 1"):
        fuse_steps([relu, neg], reads=[[1], [None]])


def test_dag_export_runs_in_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    steps, fused, feeds, outs = _dag("lstm_cell")
    blobs = ["i", "a1b", "f", "g", "o", "fc", "ig", "", "tc"]
    fused = fuse_steps(steps, outputs=[9, 7], blobs=blobs)
    expanded = expand(fused)
    assert [(s.type, list(s.input), list(s.output)) for s in expanded] == [
        (s.type, list(s.input), list(s.output)) for s in steps
    ]
    nodes = CONVERTERS["FusedElementwise"](fused).nodes
    graph = helper.make_graph(
        nodes,
        "dag",
        [
            helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, v.shape)
            for n, v in feeds.items()
        ],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, (3, 5)) for o in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    got = ort.InferenceSession(model.SerializeToString()).run(outs, feeds)
    for g, want in zip(got, _run([fused], feeds, outs)):
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6)


def test_output_over_an_input_that_a_later_step_reads_exports_last():
    # step 0 writes x (output 0, in place over input x); step 1 still reads the input x
    op = op_def("FusedElementwise", ["x"], ["x", "y"], ops=["Relu", "Sub"], slots=[0, 0, -3])
    op.arg.append(make_arg("results", [0, 1]))
    relu, sub, identity = expand(op)
    assert list(relu.output) == ["x__step0"] and list(sub.input) == ["x", "x__step0"]
    assert identity.type == "Identity" and list(identity.output) == ["x"]
    x = rand(2, 3, seed=6)
    got = _run([op], {"x": x}, ["x", "y"])
    np.testing.assert_array_equal(got[0], np.maximum(x, 0))
    np.testing.assert_array_equal(got[1], x - np.maximum(x, 0))
