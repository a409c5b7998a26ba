"""benchmarks/db_input.py: both ways of feeding the demo CNN train, step by step."""

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def bench():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "db_input.py"
    spec = importlib.util.spec_from_file_location("netbrew_db_input_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("kind", ["memory", "minidb"])
def test_step_times(bench, kind, tmp_path):
    times = bench.step_times(kind, steps=3, batch=8, folder=tmp_path)
    assert len(times) == 3 and all(t > 0 for t in times)
