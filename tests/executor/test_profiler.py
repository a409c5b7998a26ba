"""Workspace.run_net(profile=True): per-op-type and per-op calls, time, share and GFLOP/s, and
the Chrome trace."""

import json

import numpy as np
import pytest

from netbrew.executor import Workspace
from netbrew.executor.profiler import Profile, op_flops
from netbrew.netdef import Net


def conv_net(net_type: str = "simple") -> tuple[Workspace, Net]:
    rng = np.random.default_rng(0)
    ws = Workspace()
    ws.feed_blob("x", rng.normal(size=(2, 3, 8, 8)).astype(np.float32))
    ws.feed_blob("w", rng.normal(size=(4, 3, 3, 3)).astype(np.float32))
    ws.feed_blob("fc_w", rng.normal(size=(5, 4 * 6 * 6)).astype(np.float32))
    ws.feed_blob("fc_b", np.zeros(5, np.float32))
    net = Net("prof")
    y = net.Conv(["x", "w"], "c", kernel_shape=[3, 3]).Relu([], "r")
    net.FC([y, "fc_w", "fc_b"], "fc").Relu([], "out")
    if net_type != "simple":
        net.set_type(net_type, num_workers=2)
    ws.create_net(net)
    return ws, net


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_profile_rows_counts_and_gflops(net_type, capsys):
    ws, net = conv_net(net_type)
    profile = ws.run_net("prof", num_iter=3, profile=True)
    assert isinstance(profile, Profile) and profile.iterations == 3
    rows = {r.op_type: r for r in profile.rows()}
    assert set(rows) == {"Conv", "Relu", "FC"}
    assert rows["Relu"].calls == 6 and rows["Conv"].calls == 3 and rows["FC"].calls == 3
    # Conv: 2 * N * M * (6*6) * C * (3*3) per call
    assert rows["Conv"].flops == 3 * 2 * 2 * 4 * 36 * 3 * 9
    assert rows["FC"].flops == 3 * 2 * 2 * 5 * 144
    assert rows["Conv"].gflops_per_s > 0 and rows["FC"].gflops_per_s > 0
    assert rows["Relu"].gflops_per_s is None
    assert sum(r.share for r in rows.values()) == pytest.approx(100.0)
    times = [r.total_ms for r in profile.rows()]
    assert times == sorted(times, reverse=True)
    printed = capsys.readouterr().out
    assert printed.strip() == profile.table().strip()
    assert "GFLOP/s" in printed and "Conv" in printed and "total" in printed
    # the profiled run computed the same thing as a plain one
    out = ws.fetch_blob("out")
    ws.run_net("prof")
    np.testing.assert_array_equal(ws.fetch_blob("out"), out)


def test_without_profile_returns_none(capsys):
    ws, _ = conv_net()
    assert ws.run_net("prof") is None
    assert capsys.readouterr().out == ""


def test_matmul_and_gemm_flops():
    ws = Workspace()
    ws.feed_blob("a", np.ones((2, 3, 4), np.float32))
    ws.feed_blob("b", np.ones((4, 5), np.float32))
    ws.feed_blob("at", np.ones((4, 3), np.float32))
    net = Net("mm")
    net.MatMul(["a", "b"], "y")
    net.Gemm(["at", "b"], "g", transA=1)
    ws.create_net(net)
    profile = ws.run_net("mm", profile=True)
    rows = {r.op_type: r for r in profile.rows()}
    assert rows["MatMul"].flops == 2 * 2 * 3 * 5 * 4
    assert rows["Gemm"].flops == 2 * 3 * 5 * 4
    runtime = ws.get_net("mm")
    blobs = {"a": np.ones((2, 3, 4), np.float32)}
    assert op_flops(runtime.ops[0], blobs) is None  # shapes missing


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_per_op_rows_and_chrome_trace(net_type, tmp_path, capsys):
    ws, net = conv_net(net_type)
    profile = ws.run_net("prof", num_iter=4, profile=True)
    capsys.readouterr()
    ops = list(net.ops)
    assert len(profile.records) == 4 * len(ops)
    rows = profile.op_rows()
    assert sorted(r.index for r in rows) == list(range(len(ops)))
    assert all(r.calls == 4 for r in rows)
    assert sum(r.total_ms for r in rows) == pytest.approx(profile.total_ms)
    assert sum(r.share for r in rows) == pytest.approx(100.0)
    by_index = {r.index: r for r in rows}
    conv = by_index[0]
    assert (conv.op_type, conv.name, conv.device) == ("Conv", "c", "cpu")
    assert conv.output_bytes == 2 * 4 * 6 * 6 * 4  # float32 (2, 4, 6, 6)
    assert conv.mean_ms == pytest.approx(conv.total_ms / 4)
    assert conv.gflops_per_s > 0 and by_index[1].gflops_per_s is None  # Conv, Relu
    table = profile.op_table(top=2)
    assert len(table.splitlines()) == 1 + 2 + 1 and "(2 faster ops not shown)" in table
    assert profile.op_table(top=None).count("cpu") == len(ops)

    trace = json.loads(profile.save_trace(tmp_path / "trace.json").read_text())
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == 4 * len(ops)
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {e["tid"] for e in spans} <= named
    first_conv = next(e for e in spans if e["args"]["op"] == 0)
    assert first_conv["name"] == "Conv c" and first_conv["cat"] == "Conv"
    assert first_conv["args"]["outputs"] == {"c": "float32[2, 4, 6, 6]"}
    assert all(e["dur"] >= 0 for e in spans)
    # run by run, each op starts after the op before it has started (one net run at a time)
    runs = [spans[i : i + len(ops)] for i in range(0, len(spans), len(ops))]
    assert all(a[-1]["ts"] <= b[0]["ts"] for a, b in zip(runs, runs[1:]))
    assert sum(e["dur"] for e in spans) / 1e3 == pytest.approx(profile.total_ms)


def test_a_long_profile_keeps_its_totals_and_bounded_records():
    ws, net = conv_net()
    runtime = ws.get_net("prof")
    ops = len(list(net.ops))
    profile = Profile(max_records=5)
    for _ in range(3):
        runtime.run(ws._blobs, profile=profile)
        profile.iterations += 1
    assert len(profile.records) == 5 and profile.dropped == 3 * ops - 5
    # the totals still count every run
    assert {r.op_type: r.calls for r in profile.rows()} == {"Conv": 3, "Relu": 6, "FC": 3}
    assert all(r.calls == 3 for r in profile.op_rows())
    trace = profile.chrome_trace()
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == 5
    assert f"{3 * ops - 5} later ones were not kept" in trace["otherData"]["note"]
    assert "otherData" not in Profile().chrome_trace()
