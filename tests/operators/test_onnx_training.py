"""OnnxAdagrad, OnnxAdam and OnnxMomentum (ONNX's ai.onnx.preview.training optimizers)
against onnx's ReferenceEvaluator, through import and export, and their errors."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from netbrew.converters.onnx import export, import_model
from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net
from netbrew.operators.onnx_training import DOMAIN, NAMES, ROLES
from netbrew.testing import rand, run_op

CASES = {
    "Adagrad": [{"decay_factor": 0.1, "epsilon": 1e-6, "norm_coefficient": 0.001}, {}],
    "Adam": [
        {
            "alpha": 0.95,
            "beta": 0.1,
            "epsilon": 1e-7,
            "norm_coefficient": 0.001,
            "norm_coefficient_post": 0.01,
        },
        {},
    ],  # fmt: skip
    "Momentum": [
        {"alpha": 0.95, "beta": 0.1, "mode": "standard", "norm_coefficient": 0.001},
        {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.0},
    ],
}


def model(onnx_type: str, n: int, dtype, attrs: dict) -> onnx.ModelProto:
    """One preview-training node over n tensors of shape (3, 4), as the ONNX tests build it."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    roles = ROLES[NAMES[onnx_type]]
    names = [f"{role}{i}" for role in roles for i in range(n)]
    outs = [f"{role}{i}_new" for role in [roles[0], *roles[2:]] for i in range(n)]
    node = helper.make_node(onnx_type, ["R", "T", *names], outs, domain=DOMAIN, **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("R", elem, []),
         helper.make_tensor_value_info("T", TensorProto.INT64, []),
         *(helper.make_tensor_value_info(v, elem, [3, 4]) for v in names)],
        [helper.make_tensor_value_info(v, elem, [3, 4]) for v in outs],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def feeds(m: onnx.ModelProto, dtype, t: int) -> dict[str, np.ndarray]:
    out = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    for k, value in enumerate(m.graph.input[2:]):
        low = 0.0 if value.name.startswith("H") else -1.0  # squared sums are never negative
        out[value.name] = rand(3, 4, dtype=dtype, seed=k, low=low)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize(
    "onnx_type,attrs",
    [(k, a) for k, cases in CASES.items() for a in cases],
    ids=lambda v: v if isinstance(v, str) else "-".join(map(str, v.values())) or "defaults",
)
def test_matches_onnx_reference(onnx_type, attrs, n, t, dtype):
    if onnx_type == "Momentum" and not attrs:
        pytest.skip("Momentum's attributes are required")
    m = model(onnx_type, n, dtype, attrs)
    inputs = feeds(m, dtype, t)
    want = ReferenceEvaluator(m).run(None, inputs)
    init, predict = import_model(m)
    assert predict.op[0].type == NAMES[onnx_type]
    ws = Workspace()
    for name, value in inputs.items():
        ws.feed_blob(name, value)
    ws.run_net_once(predict)
    for value, expected in zip(m.graph.output, want):
        got = ws.fetch_blob(value.name)
        assert got.dtype == np.dtype(dtype), value.name
        tol = 1e-6 if dtype == np.float32 else 1e-12
        if onnx_type == "Adam" and dtype == np.float64:
            tol = 2e-5  # the reference's float64 Adam rounds through float32
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=value.name)


@pytest.mark.parametrize("onnx_type", sorted(NAMES))
def test_exports_to_the_preview_domain_and_back(onnx_type):
    attrs = CASES[onnx_type][0]
    roles = ROLES[NAMES[onnx_type]]
    names = [f"{role}{i}" for role in roles for i in range(2)]
    outs = [f"{role}{i}_new" for role in [roles[0], *roles[2:]] for i in range(2)]
    net = Net("step")
    getattr(net, NAMES[onnx_type])(["R", "T", *names], outs, **attrs)
    net.add_external_input("R", "T", *names)
    net.add_external_output(*outs)
    inputs = {"R": np.array(0.05, np.float32), "T": np.array(2, np.int64)}
    inputs.update({v: rand(3, 4, seed=k, low=0.0) for k, v in enumerate(names)})
    exported = export(net, inputs=inputs)
    (node,) = exported.graph.node
    assert (node.op_type, node.domain) == (onnx_type, DOMAIN)
    assert {(o.domain, o.version) for o in exported.opset_import} >= {(DOMAIN, 1)}
    want = ReferenceEvaluator(exported).run(None, inputs)
    ours = run_op(NAMES[onnx_type], list(inputs.values()), outputs=len(outs), **attrs)
    for expected, got in zip(want, ours):
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    _, back = import_model(exported)
    assert [op.type for op in back.op] == [NAMES[onnx_type]]


def test_errors_name_the_op_and_what_is_wrong():
    x = rand(3, 4)
    r, t = np.array(0.1, np.float32), np.array(1, np.int64)
    with pytest.raises(OperatorError, match=r"OnnxAdam: after R and T, expected X, G, V, H"):
        run_op("OnnxAdam", [r, t, x, x, x], outputs=3)
    with pytest.raises(OperatorError, match=r"OnnxAdagrad: G1 has shape \[4\], expected \[3, 4\]"):
        run_op("OnnxAdagrad", [r, t, x, rand(4), x], outputs=2)
    with pytest.raises(OperatorError, match="input 'R' must hold one value"):
        run_op("OnnxAdagrad", [np.ones(2, np.float32), t, x, x, x], outputs=2)
    with pytest.raises(OperatorError, match="mode must be 'standard' or 'nesterov'"):
        run_op("OnnxMomentum", [r, t, x, x, x], outputs=2, alpha=0.9, beta=1.0, mode="heavy",
               norm_coefficient=0.0)  # fmt: skip
    with pytest.raises(OperatorError, match="expected a int type"):
        run_op("OnnxAdagrad", [r, np.array(1.0, np.float32), x, x, x], outputs=2)
