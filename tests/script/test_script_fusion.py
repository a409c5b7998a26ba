"""Issue 25, item 6: elementwise fusion sees into a scripted Loop body, so the custom LSTM's
gate math runs as one FusedElementwise per step, with eager's numbers, in netbrew and in
onnxruntime (export expands the fused op back into its nodes inside the ONNX Loop)."""

import numpy as np
import onnxruntime as ort
import pytest
from script_checks import TOL
from test_script_acceptance import CustomLSTM

import netbrew
from netbrew import jit, nn
from netbrew.converters import onnx as nb_onnx
from netbrew.netdef.args import args_dict
from netbrew.netdef.passes import fuse_elementwise, optimize

GATE_OPS = {"Sigmoid", "Tanh", "Mul", "Add"}


def loop_body(net):
    (loop,) = [op for op in net.op if op.type == "Loop"]
    return args_dict(loop.arg)["body"]


@pytest.mark.parametrize("steps,batch", [(5, 3), (1, 1), (9, 2)])
def test_custom_lstm_gate_math_is_one_fused_op_per_step(steps, batch):
    nn.manual_seed(0)
    model = CustomLSTM(4, 6)
    x = np.random.default_rng(steps).normal(size=(steps, batch, 4)).astype(np.float32)
    expected = model.forward.eager(x)
    got = model.forward(x)  # the callable runs the optimized net
    init, predict = model.forward.init_net, model.forward.predict_net
    assert sum(op.type in GATE_OPS for op in loop_body(predict).op) == 13  # as compiled

    optimized = fuse_elementwise(optimize(predict, level=1))
    body = loop_body(optimized)
    fused = [op for op in body.op if op.type == "FusedElementwise"]
    assert len(fused) == 1
    # what is left unfused: the gates' matmuls and their sum (read by four Slices)
    assert [op.type for op in body.op if op.type in GATE_OPS] == ["Add"]
    assert set(fused[0].output) == {"cell.c_2", "cell.h_1"}  # c and h, both carried
    assert len(args_dict(fused[0].arg)["ops"]) == 12
    predictor = netbrew.Predictor(init, predict)
    assert (
        len([op for op in loop_body(predictor.predict_net).op if op.type == "FusedElementwise"])
        == 1
    )

    feeds = {"x": x}
    runs = [got, tuple(predictor.run(feeds)[n] for n in predict.external_output)]
    with jit.disabled():  # the NumPy kernel too, not only the numba loop
        runs.append(tuple(predictor.run(feeds)[n] for n in predict.external_output))
    model_onnx = nb_onnx.export(optimized, init, inputs=feeds)
    assert "FusedElementwise" not in str(model_onnx.graph)
    session = ort.InferenceSession(
        model_onnx.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    runs.append(tuple(session.run(None, feeds)))
    for run in runs:
        assert len(run) == len(expected)
        for g, e in zip(run, expected):
            np.testing.assert_allclose(g, e, **TOL)
