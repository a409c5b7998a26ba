"""`netbrew bench`: random inputs, per-op-type profile table."""

import json

import numpy as np
import pytest

from netbrew.cli import main
from netbrew.netdef import save_net
from netbrew.proto.netbrew_pb2 import TensorProto, TensorShape
from tests.test_cli import build


def table_ops(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] in (
            *("Conv", "ConvRelu", "Relu", "MaxPool", "FC", "Softmax", "Gemm", "MatMul"),
        ):
            rows[parts[0]] = parts
    return rows


def test_bench_model_folder(model_dir, capsys):
    """By default the table is of the net Predictor runs: Conv + Relu fused into ConvRelu."""
    assert main(["bench", str(model_dir), "--input", "data=2x1x6x6", "--iters", "3"]) == 0
    out = capsys.readouterr().out
    assert "net demo: 4 ops after the inference passes, 3 runs, random inputs data=2x1x6x6" in out
    assert "GFLOP/s" in out
    rows = table_ops(out)
    assert set(rows) == {"ConvRelu", "MaxPool", "FC", "Softmax"}
    assert rows["ConvRelu"][1] == "3" and float(rows["ConvRelu"][4]) > 0
    assert rows["MaxPool"][4] == "-"


def test_bench_no_optimize_profiles_the_net_as_given(model_dir, capsys):
    args = ["bench", str(model_dir), "--input", "data=2x1x6x6", "--iters", "3", "--no-optimize"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "net demo: 5 ops, 3 runs, random inputs data=2x1x6x6" in out
    rows = table_ops(out)
    assert set(rows) == {"Conv", "Relu", "MaxPool", "FC", "Softmax"}
    assert rows["Conv"][1] == "3" and float(rows["Conv"][4]) > 0
    assert rows["Relu"][4] == "-"


def test_bench_uses_value_info_and_reports_missing_shape(tmp_path, capsys):
    init, net = build()
    save_net(init, tmp_path / "init.pb")
    save_net(net, tmp_path / "predict.pb")
    assert main(["bench", str(tmp_path / "predict.pb"), "--init", str(tmp_path / "init.pb")]) == 1
    assert "input 'data' has no known shape; give --input data=DxDxD" in capsys.readouterr().err
    net.proto().value_info.append(
        TensorShape(name="data", dims=[-1, 1, 6, 6], unknown_dims=[0], data_type=TensorProto.FLOAT)
    )
    save_net(net, tmp_path / "predict.pb")
    args = ["bench", str(tmp_path / "predict.pb"), "--init", str(tmp_path / "init.pb")]
    assert main([*args, "--iters", "2"]) == 0
    out = capsys.readouterr().out
    assert "random inputs data=1x1x6x6" in out and table_ops(out)["FC"][1] == "2"
    assert main([*args, "--input", "label=3"]) == 1
    assert "--input 'label': not an input of the net" in capsys.readouterr().err


def test_bench_onnx_file(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    # big enough that its GFLOP/s never rounds to 0.00 on a slow run
    w = numpy_helper.from_array(np.ones((256, 128), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, ["n", 256])],
        [helper.make_tensor_value_info("z", T.FLOAT, ["n", 128])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["bench", str(path), "--input", "x=64x256", "--iters", "2"]) == 0
    rows = table_ops(capsys.readouterr().out)
    assert rows["MatMul"][1] == "2" and float(rows["MatMul"][4]) > 0


def test_bench_lists_slowest_ops_and_writes_a_trace(model_dir, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    args = ["bench", str(model_dir), "--input", "data=2x1x6x6", "--iters", "2"]
    assert main([*args, "--ops", "2", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    listed = out.split("slowest ops (mean over 2 runs):")[1].splitlines()
    assert listed[1].split()[:2] == ["op", "type"]
    assert all(line.split()[0].startswith("#") for line in listed[2:4])
    assert "(2 faster ops not shown)" in listed[4]
    assert f"Chrome trace of the profiled runs: {trace}" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 2 * 4  # 4 ops after the passes, 2 runs
    assert main([*args, "--ops", "0"]) == 0
    assert "slowest ops" not in capsys.readouterr().out
    assert main([*args, "--ops", "-1"]) == 1
    assert "--ops must be 0 or more, got -1" in capsys.readouterr().err


def test_bench_reports_numba_compile_time_apart(model_dir, capsys, monkeypatch):
    """The warm-up run's compile time comes from jit.compile_seconds(), read around it and
    around the profiled runs (here a counter that compiles 0.25 s in the warm-up only)."""
    from netbrew import jit

    readings = iter([10.0, 10.25, 10.25, 10.25])
    monkeypatch.setattr(jit, "compile_seconds", lambda: next(readings))
    assert main(["bench", str(model_dir), "--input", "data=2x1x6x6", "--iters", "2"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("first run "))
    first_ms = float(line.split()[5])
    assert first_ms >= 0 and "of which numba compile 250.0 ms" in line
    assert f"JIT {'on' if jit.enabled() else 'off'}" in line
    assert "numba compile in the profiled runs: 0.0 ms" in out
    with pytest.raises(StopIteration):
        next(readings)  # read exactly four times


def test_bench_compile_time_is_real_in_a_fresh_process(tmp_path):
    """In a new process the first run compiles, or loads from numba's cache, the kernel of
    Erf, so with the JIT on some of the first run is compile time, and none with it off."""
    import subprocess
    import sys

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper

    from netbrew import jit

    graph = helper.make_graph(
        [helper.make_node("Erf", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", T.FLOAT, [64, 64])],
    )
    path = tmp_path / "erf.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    args = [sys.executable, "-m", "netbrew.cli", "bench", str(path), "--iters", "1"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("first run "))
    compiled = float(line.split("numba compile ")[1].split()[0])
    first = float(line.split()[5])
    if jit.enabled():
        assert 0 < compiled <= first
    else:
        assert compiled == 0.0
