"""benchmarks/db_input.py: both ways of feeding the demo CNN train, step by step."""

import pytest


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("db_input")


@pytest.mark.parametrize("kind", ["memory", "minidb"])
def test_step_times(bench, kind, tmp_path):
    times = bench.step_times(kind, steps=3, batch=8, folder=tmp_path)
    assert len(times) == 3 and all(t > 0 for t in times)
