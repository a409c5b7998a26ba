"""benchmarks/dag.py: the wide net's ceiling run (its branches on two plain threads)
computes what the net computes, and the table prints one row per bench."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest


@pytest.fixture(scope="module")
def dag(benchmark_module):
    return benchmark_module("dag")


def test_ceiling_runs_every_branch_on_two_threads(dag):
    from netbrew.executor import Workspace

    net, feeds = dag.wide_net("simple")
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    with ThreadPoolExecutor(1) as pool:
        one, two, blobs = dag.ceiling_runs(pool)
        two()
        for b in range(8):
            np.testing.assert_allclose(blobs[f"o{b}"], ws.fetch_blob(f"o{b}"), rtol=1e-5)
        first = {b: blobs.pop(f"o{b}") for b in range(8)}
        one()
        for b in range(8):
            np.testing.assert_array_equal(blobs[f"o{b}"], first[b])


def test_main_prints_a_row_per_bench(dag, capsys, monkeypatch):
    monkeypatch.setattr(dag, "TUNING_RUNS", 0)
    monkeypatch.setattr("sys.argv", ["dag.py", "--reps", "1"])
    monkeypatch.setattr(dag, "zoo_model", lambda name: dag.wide)
    assert dag.main() == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split("  ")[0] for r in rows] == [
        "wide net (8 branches)",
        "wide net, ceiling",
        "inception_v1",
    ]
    assert "1 thread" in rows[1] and "2 threads" in rows[1]
    assert all("speed-up" in r for r in rows)
