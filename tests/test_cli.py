"""The `netbrew` command: demo, info and run, driven as a user would."""

import subprocess
import sys

import numpy as np
import pytest

from netbrew.cli import main
from netbrew.demo import build
from netbrew.netdef import save_net


@pytest.fixture
def model_dir(tmp_path):
    init, net = build()
    save_net(init, tmp_path / "model" / "init_net.pb")
    save_net(net, tmp_path / "model" / "predict_net.pb")
    return tmp_path / "model"


def test_demo_runs_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "netbrew.cli", "demo", "-o", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "matched bit for bit" in out.stdout
    assert (tmp_path / "demo" / "predict_net.pb").exists()


def test_info(model_dir, capsys):
    assert main(["info", str(model_dir)]) == 0
    text = capsys.readouterr().out
    assert "inputs:  data, conv1_w, conv1_b, fc_w, fc_b" in text
    assert "outputs: prob" in text
    assert "parameters: 810 values in 4 blobs" in text
    assert "Conv" in text and "kernels: cpu" in text


def test_info_squeezenet(squeezenet_dir, capsys):
    init = squeezenet_dir / "init_net.pb"
    assert main(["info", str(squeezenet_dir / "predict_net.pb"), "--init", str(init)]) == 0
    text = capsys.readouterr().out
    assert "Conv" in text and "26" in text
    assert "parameters: 736,964 values in 53 blobs" in text


def test_run_writes_outputs(model_dir, tmp_path, capsys):
    x = np.random.default_rng(0).uniform(size=(2, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    args = ["run", str(model_dir / "predict_net.pb"), "--init", str(model_dir / "init_net.pb")]
    assert main([*args, "--input", f"data={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out")]) == 0
    prob = np.load(tmp_path / "out" / "prob.npy")
    assert prob.shape == (2, 10)
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    assert "prob: float32[2, 10]" in capsys.readouterr().out


def test_run_reports_missing_feed(model_dir, capsys):
    assert main(["run", str(model_dir)]) == 1
    assert "missing input 'data'" in capsys.readouterr().err


def test_corrupt_model_is_a_clean_error(tmp_path, capsys):
    (tmp_path / "bad.pb").write_bytes(b"\xff\xff\xff")
    assert main(["info", str(tmp_path / "bad.pb")]) == 1
    assert "bad.pb: not a valid binary NetDef" in capsys.readouterr().err
