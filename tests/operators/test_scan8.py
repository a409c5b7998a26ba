"""Scan8 (ONNX opset 8's batched Scan): against onnxruntime and a NumPy loop, its
gradient against central differences, the importer's routing, and its errors."""

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import TensorProto, helper

from netbrew.converters.onnx import import_model
from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import check_gradient, rand, run_op
from tests.operators.net_gradcheck import check_net_gradient, graph

# body(s, a, b) -> (s + a * b, s + a * b, a - b): a state, two scan inputs, two scan outputs
BODY = """
body (float[2] s, float[2] a, float[2] b) => (float[2] s2, float[2] y, float[2] d) {
    p = Mul(a, b)
    s2 = Add(s, p)
    y = Identity(s2)
    d = Sub(a, b)
}
"""
LENS = np.array([4, 2, 1], np.int64)  # onnxruntime refuses a length of 0


def scan8_model(with_lens: bool, directions=(0, 1)) -> onnx.ModelProto:
    node = onnx.parser.parse_node(
        f"y_final, ys, ds = Scan ({'lens' if with_lens else ''}, s0, a, b) "
        f"<num_scan_inputs = 2, directions = {list(directions)}, body = {BODY}>"
    )
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("s0", f, [3, 2]),
              helper.make_tensor_value_info("a", f, [3, 4, 2]),
              helper.make_tensor_value_info("b", f, [3, 4, 2])]  # fmt: skip
    if with_lens:
        inputs.insert(0, helper.make_tensor_value_info("lens", TensorProto.INT64, [3]))
    outputs = [helper.make_tensor_value_info("y_final", f, [3, 2]),
               helper.make_tensor_value_info("ys", f, [3, 4, 2]),
               helper.make_tensor_value_info("ds", f, [3, 4, 2])]  # fmt: skip
    g = helper.make_graph([node], "scan8", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)], ir_version=4)


def numpy_scan8(s0, a, b, lens, directions):
    finals, ys, ds = [], np.zeros_like(a), np.zeros_like(a)
    for n in range(len(s0)):
        s = s0[n].copy()
        order = range(lens[n])
        for t, (ta, tb) in enumerate(zip(order, reversed(order) if directions[1] else order)):
            s = s + a[n, ta] * b[n, tb]
            ys[n, t], ds[n, t] = s, a[n, ta] - b[n, tb]
        finals.append(s)
    return np.stack(finals), ys, ds


def feeds():
    return {"s0": rand(3, 2), "a": rand(3, 4, 2, seed=1), "b": rand(3, 4, 2, seed=2)}


@pytest.mark.parametrize("with_lens", [False, True])
def test_matches_onnxruntime_and_a_numpy_loop(with_lens):
    ort = pytest.importorskip("onnxruntime")
    model = scan8_model(with_lens)
    inputs = feeds()
    if with_lens:
        inputs = {"lens": LENS, **inputs}
    init, predict = import_model(model)
    assert [op.type for op in predict.op] == ["Scan8"]
    ws = Workspace()
    for name, value in inputs.items():
        ws.feed_blob(name, value)
    ws.run_net_once(predict)
    ours = [ws.fetch_blob(n) for n in ("y_final", "ys", "ds")]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(None, inputs)
    lens = LENS if with_lens else np.array([4, 4, 4])
    mine = numpy_scan8(inputs["s0"], inputs["a"], inputs["b"], lens, (0, 1))
    for got, ort_value, np_value in zip(ours, theirs, mine):
        np.testing.assert_allclose(got, ort_value, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, np_value, rtol=1e-6, atol=1e-6)


def test_an_empty_sequence_keeps_its_state_and_pads_its_outputs():
    """onnxruntime refuses a length of 0; ONNX allows any length up to the longest."""
    init, predict = import_model(scan8_model(with_lens=True))
    inputs = {"lens": np.array([0, 3, 4], np.int64), **feeds()}
    ws = Workspace()
    for name, value in inputs.items():
        ws.feed_blob(name, value)
    ws.run_net_once(predict)
    want = numpy_scan8(inputs["s0"], inputs["a"], inputs["b"], inputs["lens"], (0, 1))
    for name, expected in zip(("y_final", "ys", "ds"), want):
        np.testing.assert_allclose(ws.fetch_blob(name), expected, rtol=1e-6, err_msg=name)


def f64(*shape, seed=0):
    return rand(*shape, dtype=np.float64, seed=seed)


CUMSUM = graph([op_def("Mul", ["x", "x"], ["xx"]), op_def("Add", ["s", "xx"], ["s2"])],
               ["s", "x"], ["s2", "s2"])  # fmt: skip


@pytest.mark.parametrize("lens", [None, np.array([3, 1], np.int64), np.array([0, 2], np.int64)])
@pytest.mark.parametrize("directions", [[0], [1]])
def test_gradient_matches_central_differences(lens, directions):
    check_gradient("Scan8", [lens, f64(2, 3), f64(2, 3, 3, seed=1)], outputs=2, eps=1e-6,
                   rtol=1e-6, body=CUMSUM, num_scan_inputs=1, directions=directions)  # fmt: skip


def test_gradient_reaches_a_blob_the_body_captures():
    body = graph([op_def("Mul", ["x", "w"], ["xw"]), op_def("Add", ["s", "xw"], ["s2"])],
                 ["s", "x"], ["s2", "s2"])  # fmt: skip
    ops = [
        op_def("Scan8", ["lens", "s0", "xs"], ["final", "ys"], body=body, num_scan_inputs=1),
        op_def("Mul", ["ys", "ys"], ["sq"]),
        op_def("ReduceSum", ["sq"], ["a"], keepdims=0),
        op_def("ReduceSum", ["final"], ["b"], keepdims=0),
        op_def("Add", ["a", "b"], ["loss"]),
    ]
    feeds_ = {"lens": np.array([2, 3], np.int64), "s0": f64(2, 4), "xs": f64(2, 3, 4, seed=1),
              "w": f64(4, seed=2)}  # fmt: skip
    check_net_gradient(ops, feeds_, ["s0", "xs", "w"])


def test_errors_name_what_is_wrong():
    s, x = rand(2, 3), rand(2, 4, 3)
    attrs = dict(body=CUMSUM, num_scan_inputs=1, outputs=2)
    with pytest.raises(OperatorError, match=r"batch sizes \(axis 0\) differ: \[2, 3\]"):
        run_op("Scan8", [None, rand(3, 3), x], **attrs)
    with pytest.raises(OperatorError, match=r"sequence_lens \[5, 1\] must lie in \[0, 4\]"):
        run_op("Scan8", [np.array([5, 1], np.int64), s, x], **attrs)
    with pytest.raises(OperatorError, match="sequence_lens must be 2 integers"):
        run_op("Scan8", [np.array([1.0, 2.0], np.float32), s, x], **attrs)
    with pytest.raises(OperatorError, match="scan input 0 has rank 1"):
        run_op("Scan8", [None, s, rand(2)], **attrs)


def test_export_refuses_it_saying_why():
    from netbrew.converters.onnx import export
    from netbrew.errors import UnsupportedConversion

    init, predict = import_model(scan8_model(with_lens=False))
    with pytest.raises(UnsupportedConversion, match="opset 8's batched Scan"):
        export(predict, init, inputs=feeds())


def test_scan8_gradient_is_scan_gradient_per_batch_entry():
    s0, xs, dys = f64(2, 3), f64(2, 4, 3, seed=1), f64(2, 4, 3, seed=2)
    attrs = dict(body=CUMSUM, num_scan_inputs=1, outputs=2)
    got = run_op("Scan8Gradient", [None, s0, xs, None, dys], directions=[1], **attrs)
    for b in range(2):
        want = run_op("ScanGradient", [s0[b], xs[b], None, dys[b]],
                      scan_input_directions=[1], **attrs)  # fmt: skip
        for g, w in zip(got, want):
            np.testing.assert_allclose(g[b], w, rtol=1e-12)
    with pytest.raises(OperatorError, match="Scan8Gradient: got 4 inputs, expected 5"):
        run_op("Scan8Gradient", [None, s0, xs, None], **attrs)
