"""Workspace.run_net(profile=True): per-op-type calls, time, share and GFLOP/s."""

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
