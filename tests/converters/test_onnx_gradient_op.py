"""ONNX's preview-training Gradient op, imported as autodiff's gradient ops: the gradients
against central differences of the forward graph run by onnx's ReferenceEvaluator."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from netbrew.converters.onnx import export, import_model
from netbrew.errors import ModelLoadError, UnsupportedConversion
from netbrew.executor import Workspace

DOMAIN = "ai.onnx.preview.training"
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, extra_outputs=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in [*outputs, *extra_outputs]],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def run(m: onnx.ModelProto, feeds: dict) -> dict:
    init, predict = import_model(m)
    ws = Workspace()
    ws.run_net_once(init)
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(predict)
    return {v.name: ws.fetch_blob(v.name) for v in m.graph.output}


def numeric_gradient(forward: onnx.ModelProto, feeds: dict, x: str, y: str, eps=1e-3):
    """d sum(Y) / dX by central differences, in float64 on float32 runs."""
    ref = ReferenceEvaluator(forward)
    grad = np.zeros(feeds[x].shape)
    for i in np.ndindex(feeds[x].shape):
        total = []
        for step in (eps, -eps):
            moved = {k: v.copy() for k, v in feeds.items()}
            moved[x][i] += step
            total.append(float(np.sum(ref.run([y], moved)[0], dtype=np.float64)))
        grad[i] = (total[0] - total[1]) / (2 * eps)
    return grad


FORWARD = [
    helper.make_node("MatMul", ["X", "W"], ["h"]),
    helper.make_node("Add", ["h", "b"], ["a"]),
    helper.make_node("Tanh", ["a"], ["t"]),
    helper.make_node("Mul", ["t", "W2"], ["Y"]),
]
SHAPES = [("X", [2, 3]), ("W", [3, 4]), ("b", [4]), ("W2", [2, 4]), ("U", [5])]


def test_gradients_of_a_small_net_match_central_differences():
    rng = np.random.default_rng(0)
    feeds = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in SHAPES}
    grad = helper.make_node("Gradient", ["W", "b", "U", "X"], ["dW", "db", "dU"],
                            domain=DOMAIN, xs=["W", "b", "U"], zs=["X"], y="Y")  # fmt: skip
    m = model([*FORWARD, grad], SHAPES, [("Y", [2, 4])],
              [("dW", [3, 4]), ("db", [4]), ("dU", [5])])  # fmt: skip
    got = run(m, feeds)
    forward = model(FORWARD, SHAPES, [("Y", [2, 4])])
    np.testing.assert_allclose(got["Y"], ReferenceEvaluator(forward).run(["Y"], feeds)[0],
                               rtol=1e-6)  # fmt: skip
    for x in ("W", "b"):
        want = numeric_gradient(forward, feeds, x, "Y")
        np.testing.assert_allclose(got[f"d{x}"], want, rtol=2e-2, atol=2e-3, err_msg=x)
    np.testing.assert_array_equal(got["dU"], np.zeros(5, np.float32))  # Y does not read U


def test_gradient_blobs_do_not_take_names_the_model_uses():
    """The model's own "a_grad" keeps its value; the gradient ops write elsewhere."""
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["a"]),
        helper.make_node("Neg", ["x"], ["a_grad"]),
        helper.make_node("Gradient", ["x"], ["dx"], domain=DOMAIN, xs=["x"], y="a"),
    ]
    m = model(nodes, [("x", [3])], [("a_grad", [3]), ("dx", [3])])
    x = np.array([1.0, -2.0, 0.5], np.float32)
    got = run(m, {"x": x})
    np.testing.assert_allclose(got["a_grad"], -x)
    np.testing.assert_allclose(got["dx"], 2 * x)


@pytest.mark.parametrize(
    "attrs,inputs,match",
    [
        ({"xs": ["x"]}, ["x"], "'xs' and 'y' are required"),
        ({"xs": ["x"], "y": "missing"}, ["x"], "'missing' is not computed"),
        ({"xs": ["x"], "y": "a"}, [], "inputs must be xs then zs"),
    ],
)
def test_malformed_gradient_nodes_are_refused(attrs, inputs, match):
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"]),
             helper.make_node("Gradient", inputs, ["dx"], domain=DOMAIN, **attrs)]  # fmt: skip
    with pytest.raises(ModelLoadError, match=match):
        import_model(model(nodes, [("x", [3])], [("dx", [3])]))


def test_export_refuses_the_imported_training_net():
    nodes = [
        helper.make_node("Mul", ["x", "x"], ["a"]),
        helper.make_node("Gradient", ["x"], ["dx"], domain=DOMAIN, xs=["x"], y="a"),
    ]
    init, predict = import_model(model(nodes, [("x", [3])], [("dx", [3])]))
    with pytest.raises(UnsupportedConversion, match="gradient op"):
        export(predict, init, inputs={"x": np.ones(3, np.float32)})
