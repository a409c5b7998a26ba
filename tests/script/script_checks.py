"""Shared checks for script tests: one compiled net, four ways to run it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from netbrew.converters import onnx as nb_onnx
from netbrew.executor import Predictor, Workspace
from netbrew.proto.netbrew_pb2 import NetDef

TOL = {"rtol": 1e-6, "atol": 1e-6}


def as_tuple(value):
    return tuple(value) if isinstance(value, tuple) else (value,)


def feeds_for(scripted, args) -> dict:
    """The net's input blobs for these call arguments (ints as int64, floats as float64)."""
    predict = scripted.predict_net
    return {name: _array(a) for name, a in zip(predict.external_input, args)}


def _array(value) -> np.ndarray:
    if isinstance(value, bool) or not isinstance(value, int):
        return np.asarray(value)
    return np.asarray(value, np.int64)


def run_dag(init_net: NetDef, predict_net: NetDef, feeds: dict) -> list:
    ws = Workspace()
    ws.run_net_once(init_net)
    net = NetDef()
    net.CopyFrom(predict_net)
    net.type = "dag"
    net.num_workers = 2
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.create_net(net)
    ws.run_net(net.name)
    return [ws.fetch_blob(n) for n in net.external_output]


def check_all_ways(scripted, args, expected, onnx_model=None) -> None:
    """script == eager, and so do Predictor, the dag runtime and onnxruntime."""
    got = as_tuple(scripted(*args))
    expected = as_tuple(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, **TOL)
        assert np.asarray(g).dtype == np.asarray(e).dtype or np.ndim(e) == 0
    feeds = feeds_for(scripted, args)
    init, predict = scripted.init_net, scripted.predict_net
    outputs = Predictor(init, predict).run(feeds)
    for name, e in zip(predict.external_output, expected):
        np.testing.assert_allclose(outputs[name], e, **TOL)
    for g, e in zip(run_dag(init, predict, feeds), expected):
        np.testing.assert_allclose(g, e, **TOL)
    model = onnx_model or nb_onnx.export(predict, init, inputs=feeds)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for g, e in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(g, e, **TOL)
