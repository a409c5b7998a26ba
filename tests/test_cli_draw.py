"""`netbrew draw`: a model folder, a predict_net file or an .onnx file to .svg/.png/.dot."""

import shutil

import pytest

from netbrew.cli import main

pytest.importorskip("graphviz")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot not installed")


def test_draw_model_folder_to_dot(model_dir, tmp_path, capsys):
    out = tmp_path / "net.dot"
    assert main(["draw", str(model_dir), "-o", str(out)]) == 0
    text = out.read_text()
    assert "#0 Conv" in text and "#4 Softmax" in text and "ellipse" in text
    assert f"-> {out}" in capsys.readouterr().out


def test_draw_minimal_no_shapes_and_shapes_from_a_run(model_dir, tmp_path):
    out = tmp_path / "min.dot"
    assert main(["draw", str(model_dir / "predict_net.pb"), "-o", str(out), "--minimal"]) == 0
    assert "ellipse" not in out.read_text()
    ran = tmp_path / "ran.dot"
    assert main(["draw", str(model_dir), "-o", str(ran), "--input", "data=2x1x6x6"]) == 0
    assert "float[2,1,6,6]" in ran.read_text() and "float[2,10]" in ran.read_text()
    none = tmp_path / "none.dot"
    args = ["draw", str(model_dir), "-o", str(none), "--input", "data=2x1x6x6", "--no-shapes"]
    assert main(args) == 0
    assert "float[" not in none.read_text()


def test_draw_onnx_uses_inferred_value_info(model_dir, tmp_path):
    onnx_file = tmp_path / "m.onnx"
    assert main(["convert", str(model_dir), "-o", str(onnx_file), "--input", "data=1x1x6x6"]) == 0
    out = tmp_path / "onnx.dot"
    assert main(["draw", str(onnx_file), "-o", str(out)]) == 0
    assert "float[1,1,6,6]" in out.read_text()


def test_draw_without_dot_writes_dot_and_hint(model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["draw", str(model_dir), "-o", str(tmp_path / "net.svg")]) == 0
    assert (tmp_path / "net.dot").exists() and not (tmp_path / "net.svg").exists()
    captured = capsys.readouterr()
    assert "apt-get install graphviz" in captured.err and "net.dot" in captured.out


@needs_dot
def test_draw_svg_and_png(model_dir, tmp_path):
    assert main(["draw", str(model_dir), "-o", str(tmp_path / "net.svg")]) == 0
    assert "<svg" in (tmp_path / "net.svg").read_text()
    assert main(["draw", str(model_dir), "-o", str(tmp_path / "net.png")]) == 0
    assert (tmp_path / "net.png").read_bytes()[:4] == b"\x89PNG"


def test_draw_bad_format_and_info_suggests_draw(model_dir, tmp_path, capsys):
    assert main(["draw", str(model_dir), "-o", str(tmp_path / "net.jpeg")]) == 1
    assert "cannot draw to .jpeg" in capsys.readouterr().err
    assert main(["info", str(model_dir)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"netbrew draw {model_dir} -o net.svg")
