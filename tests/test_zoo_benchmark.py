"""benchmarks/zoo.py end to end: alternating rounds of both netbrew entry points and
onnxruntime, table rows whose outputs agree with onnxruntime, RESULTS.md written where asked;
the PyTorch-built models exported once into a cache, and skipped with a note without torch."""

from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def zoo(benchmark_module):
    return benchmark_module("zoo")


def table(path: Path) -> dict[str, dict[str, str]]:
    """model -> column heading -> cell, from the markdown table zoo.py wrote."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    heads = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(heads, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]
    return {row["model"]: row for row in rows}


def check_row(row: dict[str, str], entries=("predictor", "backend")) -> None:
    ort = float(row["onnxruntime ms"])
    assert ort > 0
    for entry in entries:
        ms = float(row[f"netbrew-{entry} ms"])
        assert ms > 0
        assert float(row[f"{entry} / ORT"]) == pytest.approx(ms / ort, rel=0.05, abs=0.01)
        assert float(row[f"{entry} / ORT (median of rounds)"]) > 0
        assert row[f"{entry} = ORT"] == "yes"
    assert row["Reference = ORT"] == "-"  # no reference run


def test_zoo_runs_rounds_and_writes_the_table(zoo, tmp_path, capsys):
    if not Path(zoo.model_path("squeezenet")).exists():
        pytest.skip("onnx's light model zoo is not installed")
    out = tmp_path / "RESULTS.md"
    args = ["--models", "squeezenet", "--reps", "3", "--rounds", "2", "--skip-reference"]
    zoo.main([*args, "--out", str(out)])
    log = capsys.readouterr().err
    # 3 timed runs split 2 + 1 over two rounds of Predictor, backend, then onnxruntime
    assert "netbrew-predictor x2 (1/6)" in log and "netbrew-backend x2 (2/6)" in log
    assert "onnxruntime x2 (3/6)" in log and "netbrew-predictor x1 (4/6)" in log
    assert "onnxruntime x1 (6/6)" in log
    check_row(table(out)["squeezenet"])


def test_zoo_entry_option_times_one_entry_point(zoo, tmp_path, capsys):
    if not Path(zoo.model_path("squeezenet")).exists():
        pytest.skip("onnx's light model zoo is not installed")
    out = tmp_path / "RESULTS.md"
    args = ["--models", "squeezenet", "--reps", "1", "--rounds", "1", "--skip-reference"]
    zoo.main([*args, "--entry", "predictor", "--out", str(out)])
    assert "netbrew-backend" not in capsys.readouterr().err
    row = table(out)["squeezenet"]
    assert "netbrew-backend ms" not in row
    check_row(row, entries=("predictor",))


@pytest.fixture(scope="module")
def torch_cache(tmp_path_factory):
    pytest.importorskip("torch")
    return tmp_path_factory.mktemp("zoo_cache")


@pytest.mark.parametrize("name", ["bert_layer", "mobilenetv2"])
def test_torch_models_export_once_and_run(zoo, name, torch_cache, tmp_path, capsys):
    out = tmp_path / "RESULTS.md"
    args = ["--models", name, "--reps", "1", "--rounds", "1", "--skip-reference"]
    zoo.main([*args, "--cache", str(torch_cache), "--out", str(out)])
    exported = list(torch_cache.glob(f"{name}-torch*.onnx"))
    assert len(exported) == 1
    check_row(table(out)[name])
    stamp = exported[0].stat().st_mtime_ns
    assert zoo.model_path(name, torch_cache) == str(exported[0])  # the cached file again
    assert exported[0].stat().st_mtime_ns == stamp


def test_mobilenetv2_has_the_real_layout(benchmark_module):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("torch")
    zoo_torch = benchmark_module("zoo_torch")
    module, example = zoo_torch.build("mobilenetv2")
    convs = [m for m in module.modules() if type(m).__name__ == "Conv2d"]
    depthwise = [c for c in convs if c.groups > 1]
    assert len(convs) == 52 and len(depthwise) == 17
    assert all(c.groups == c.in_channels == c.out_channels for c in depthwise)
    assert tuple(module(example).shape) == (1, 1000)
    params = sum(p.numel() for p in module.parameters())
    assert 3.4e6 < params < 3.6e6  # torchvision's mobilenet_v2 has 3,504,872
    assert onnx.defs.has("Clip")


def test_torch_models_skipped_with_a_note_without_torch(zoo, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(zoo.zoo_torch, "torch_missing", lambda: "PyTorch is not installed")
    out = tmp_path / "RESULTS.md"
    zoo.main(["--models", "bert_layer", "--skip-reference", "--out", str(out)])
    assert "skipping bert_layer: PyTorch is not installed" in capsys.readouterr().err
    text = out.read_text()
    assert "- bert_layer not run: PyTorch is not installed" in text
    assert table(out) == {}


def test_paired_ratio_is_the_median_of_round_ratios(zoo):
    """Each round's netbrew median over onnxruntime's of that round, the median taken: a
    round where both ran slow counts as its ratio, not as one slow side."""
    assert zoo.paired_ratio([12.3, 13.4, 8.9], [6.6, 3.8, 3.8]) == pytest.approx(8.9 / 3.8)
    assert zoo.paired_ratio([2.0, 4.0], [1.0, 1.0]) == pytest.approx(3.0)
    assert zoo.paired_ratio([2.0, None], [1.0, 1.0]) is None
    assert zoo.paired_ratio([], []) is None
