"""Caffe2 programs, ported with only their data loading changed, run unchanged in their
Caffe2 calls under `python -m netbrew.caffe2` (the import hook maps caffe2.* to
netbrew.caffe2.*), and reach the numbers the originals reached."""

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def run(script: str, *args: str, cwd: Path | None = None) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "netbrew.caffe2", str(HERE / script), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout + out.stderr


def number(text: str, label: str) -> float:
    return float(re.search(rf"{re.escape(label)}:? \[?(-?[\d.]+)", text).group(1))


def numbers(text: str, label: str) -> list[float]:
    line = next(li for li in text.splitlines() if li.startswith(label + " "))
    return [float(v) for v in re.findall(r"-?\d+\.\d*", line)]


def test_basics():
    out = run("basics.py")
    for line in (
        "fetched equals fed: True",
        "blobs in gutentag: []",
        "has my_x: True",
        "blobs after reset: []",
        "missing blob: blob 'invincible_pink_unicorn' is not in the workspace",
        "relu ok: True",
        "drawn nodes: 8 edges: 7",
        "blobs: ['W', 'X', 'Y', 'b']",
        "fc ok: True",
        "gradient of fc_w: fc_w_grad",
        "softmax rows sum to 1: True",
        "gpu net ran on cpu: (16, 100)",
    ):
        assert line in out, f"{line!r} missing from:\n{out}"
    assert out.count("DeviceFallbackWarning") == 1
    assert abs(number(out, "gaussian mean") - 1.0) < 0.05


def test_toy_regression_recovers_its_weights():
    out = run("toy_regression.py")
    w, b = numbers(out, "W"), numbers(out, "B")
    assert numbers(out, "W_gt") == [2.0, 1.5] and numbers(out, "B_gt") == [0.5]
    assert abs(w[0] - 2.0) < 0.15 and abs(w[1] - 1.5) < 0.15, out
    assert abs(b[0] - 0.5) < 0.15, out
    assert "ITER 100" in out


def test_mnist_lenet_trains_and_its_test_model_keeps_the_weights(tmp_path):
    out = run("mnist.py", "--iters", "150", "--root", str(tmp_path))
    # init_params=False: the test model's init net must not re-randomise (0.108 before).
    assert number(out, "test accuracy") >= 0.90, out
    assert number(out, "deploy accuracy (first batch)") >= 0.85, out
    assert "optimizer state kept apart: True" in out
    assert (tmp_path / "loss.log").read_text().strip()


def test_char_rnn_loss_falls_below_half_of_unigram(tmp_path):
    random.seed(0)
    words = "the quick brown fox jumps over the lazy dog while a small cat sleeps".split()
    text = " ".join(" ".join(words[: random.randint(4, 8)]) + "." for _ in range(400))
    (tmp_path / "text.txt").write_text(text)
    out = run("char_rnn.py", "--train_data", str(tmp_path / "text.txt"), "--iters", "300",
              "--batch_size", "4")  # fmt: skip
    unigram, smooth = number(out, "unigram loss"), number(out, "smooth loss")
    assert smooth < unigram / 2, out
    assert "generated: 't" in out


def test_the_hook_maps_caffe2_modules_onto_netbrew():
    code = (
        "import caffe2.python.core as c, netbrew.caffe2.python.core as n; "
        "from caffe2.proto import caffe2_pb2; "
        "print(c is n, caffe2_pb2.CUDA, caffe2_pb2.NetDef.__module__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import netbrew.caffe2 as h; h.install(); {code}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.stdout.split() == ["True", "1", "netbrew_pb2"], out.stderr
    code = "import netbrew.caffe2 as h; h.install(); import caffe2.python.nope"
    missing = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
    assert "netbrew.caffe2 has no 'netbrew.caffe2.python.nope'" in missing.stderr


@pytest.mark.parametrize("argv", [[], ["--help"]])
def test_the_runner_explains_itself(argv):
    out = subprocess.run([sys.executable, "-m", "netbrew.caffe2", *argv], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert "usage: python -m netbrew.caffe2 script.py" in out.stdout
    assert out.returncode == (0 if argv else 2)
