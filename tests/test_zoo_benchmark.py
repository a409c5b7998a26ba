"""benchmarks/zoo.py end to end on one small model: alternating rounds, a table row whose
outputs agree with onnxruntime, and RESULTS.md written where asked."""

from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def zoo(benchmark_module):
    return benchmark_module("zoo")


def test_zoo_runs_rounds_and_writes_the_table(zoo, tmp_path, capsys):
    if not Path(zoo.model_path("squeezenet")).exists():
        pytest.skip("onnx's light model zoo is not installed")
    out = tmp_path / "RESULTS.md"
    zoo.main(
        [
            "--models",
            "squeezenet",
            "--reps",
            "3",
            "--rounds",
            "2",
            "--skip-reference",
            "--out",
            str(out),
        ]
    )
    log = capsys.readouterr().err
    # 3 timed runs split 2 + 1 over two rounds of netbrew then onnxruntime
    assert "netbrew x2 (1/4)" in log and "onnxruntime x2 (2/4)" in log
    assert "netbrew x1 (3/4)" in log and "onnxruntime x1 (4/4)" in log
    row = next(line for line in out.read_text().splitlines() if line.startswith("| squeezenet"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1]) > 0 and float(cells[2]) > 0  # netbrew ms, onnxruntime ms
    ratio = float(cells[1]) / float(cells[2])  # from the rounded ms
    assert float(cells[3]) == pytest.approx(ratio, rel=0.05)
    assert cells[-2:] == ["yes", "-"]  # netbrew agrees with onnxruntime; no reference run
