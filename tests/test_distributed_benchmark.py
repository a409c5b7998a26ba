"""benchmarks/distributed.py: its measurements run in a world of one and on 2 ranks, and the
table's ratios come from the figures it shows."""

import argparse

import pytest


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("distributed")


ARGS = argparse.Namespace(steps=3, batch=8, reps=2)


def test_throughput_in_a_world_of_one(bench):
    result = bench.throughput(steps=3, batch=8)
    assert result["ranks"] == 1 and result["images_per_s"] > 0


def test_table_ratios(bench):
    one = {"throughput": {"images_per_s": 100.0}}
    two = {
        "throughput": {"images_per_s": 190.0},
        "allreduce": [{"mb": 25, "netbrew_ms": 11.0, "mpi4py_ms": 10.0, "mpi4py_in_place_ms": 5.5}],
    }
    table = bench.render(one, two, ARGS)
    assert "| 2 | 190 | 1.90 |" in table
    assert "| 25 MB | 11.00 | 10.00 | 1.10 | 5.50 | 2.00 |" in table


def test_a_two_rank_job_reports_both_allreduces(bench):
    pytest.importorskip("mpi4py")
    try:
        from netbrew.distributed.launch import find_mpiexec

        find_mpiexec()
    except Exception:
        pytest.skip("no mpiexec")
    result = bench.run_job(2, ARGS)
    assert result["throughput"]["ranks"] == 2
    assert [row["mb"] for row in result["allreduce"]] == [1, 25]
    for row in result["allreduce"]:
        assert row["netbrew_ms"] > 0 and row["mpi4py_ms"] > 0 and row["mpi4py_in_place_ms"] > 0
