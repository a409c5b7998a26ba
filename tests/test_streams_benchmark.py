"""benchmarks/streams.py: two streams run at once and are timed per inference, and a run on
one small model writes a row whose figures hang together."""

import time
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def streams(benchmark_module):
    return benchmark_module("streams")


def test_two_streams_run_at_once(streams, monkeypatch):
    """Two streams of 4 runs that each sleep 20 ms (sleep releases the GIL) overlap: about
    10 ms per inference, where one after the other would take 20."""
    monkeypatch.setattr(streams, "WARMUP", 1)
    calls = []

    def run(feeds):
        calls.append(feeds["x"])
        time.sleep(0.02)

    per_inference = streams.two_streams([run, run], {"x": 1}, reps=4)
    assert len(calls) == 2 * (4 + 1)
    assert 0.009 <= per_inference < 0.019


def test_streams_writes_a_consistent_row(streams, tmp_path):
    pytest.importorskip("onnxruntime")
    if not Path(streams.model_path("squeezenet")).exists():
        pytest.skip("onnx's light model zoo is not installed")
    out = tmp_path / "STREAMS.md"
    streams.main(["--models", "squeezenet", "--reps", "2", "--rounds", "1", "--out", str(out)])
    row = next(line for line in out.read_text().splitlines() if line.startswith("| squeezenet"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    nb, one, both, ort = (float(c) for c in cells[1:5])
    assert min(nb, one, both, ort) > 0
    # the ratios come from the unrounded times, the cells hold them to 0.1 ms
    assert float(cells[5]) == pytest.approx(nb / ort, rel=0.1)
    assert float(cells[6]) == pytest.approx(both / ort, rel=0.1)
