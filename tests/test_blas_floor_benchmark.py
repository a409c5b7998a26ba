"""benchmarks/blas_floor.py: its clock counts the time spent inside np.matmul and puts
np.matmul back, and a run on one small model writes a row whose figures hang together."""

import time
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="module")
def floor(benchmark_module):
    return benchmark_module("blas_floor")


def test_clock_counts_matmul_time_and_restores_it(floor, monkeypatch):
    real = np.matmul

    def slow(*args, **kwargs):
        time.sleep(0.02)
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "matmul", slow)
    a = np.arange(6.0).reshape(2, 3)
    with floor.BlasClock() as clock:
        got = np.matmul(a, a.T)
        np.add(a, a)  # not BLAS: not counted
        np.matmul(a, a.T, out=np.empty((2, 2)))
    assert np.matmul is slow
    np.testing.assert_array_equal(got, a @ a.T)
    assert clock.calls == 2
    assert 0.04 <= clock.seconds < 1.0


def test_floor_writes_a_consistent_row(floor, tmp_path):
    pytest.importorskip("onnxruntime")
    if not Path(floor.model_path("squeezenet")).exists():
        pytest.skip("onnx's light model zoo is not installed")
    out = tmp_path / "BLAS_FLOOR.md"
    floor.main(["--models", "squeezenet", "--reps", "2", "--skip-reference", "--out", str(out)])
    row = next(line for line in out.read_text().splitlines() if line.startswith("| squeezenet"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    nb, blas, share, calls, ort = (
        float(cells[1]),
        float(cells[2]),
        cells[3],
        int(cells[4]),
        float(cells[5]),
    )
    assert 0 < blas <= nb and ort > 0
    assert calls > 0
    assert float(share.rstrip("%")) == pytest.approx(100 * blas / nb, abs=2)
    assert float(cells[6]) == pytest.approx(nb / ort, rel=0.05)
    assert float(cells[7]) == pytest.approx(blas / ort, rel=0.05)
    assert cells[8:] == ["-", "-", "-"]  # no reference run
