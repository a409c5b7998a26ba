"""netbrew.cuda without a GPU: availability, and DeviceError naming what is missing."""

import sys
import types

import numpy as np
import pytest

import netbrew as nb
from netbrew import cuda
from netbrew.executor import Workspace
from netbrew.netdef import Net


@pytest.fixture
def no_pycuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda -> ImportError
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    monkeypatch.setattr(cuda, "_init_error", None)


@pytest.fixture
def fake_driver(monkeypatch):
    """A pycuda.driver whose init fails (no driver) or that sees `count` devices."""

    def install(count=None, fail=None):
        drv = types.ModuleType("pycuda.driver")

        def init():
            if fail:
                raise RuntimeError(fail)

        drv.init = init
        drv.Device = types.SimpleNamespace(count=lambda: count or 0)
        package = types.ModuleType("pycuda")
        package.driver = drv
        monkeypatch.setitem(sys.modules, "pycuda", package)
        monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
        monkeypatch.setattr(cuda, "_init_error", None)

    return install


def test_without_pycuda(no_pycuda):
    assert not cuda.is_available() and cuda.device_count() == 0
    with pytest.raises(cuda.DeviceError, match=r"pycuda, which is not installed.*netbrew\[cuda\]"):
        cuda.require("cuda:0")


def test_without_a_driver(fake_driver):
    fake_driver(fail="cuInit failed: no CUDA-capable device is detected")
    assert not cuda.is_available()
    with pytest.raises(cuda.DeviceError, match="CUDA driver could not start.*no CUDA-capable"):
        cuda.require(0)


def test_without_that_device(fake_driver):
    fake_driver(count=1)
    assert cuda.is_available() and cuda.device_count() == 1
    with pytest.raises(cuda.DeviceError, match=r"no CUDA device 3: the driver sees 1 device\(s\)"):
        cuda.require("cuda:3")


def test_a_cpu_only_run_never_imports_pycuda():
    import subprocess

    code = (
        "import sys, numpy as np, netbrew as nb; from netbrew.netdef import Net; "
        "n = Net('n'); n.Relu('x', 'y'); ws = nb.Workspace(); "
        "ws.feed_blob('x', np.ones(2, np.float32)); ws.run_net_once(n); "
        "print('pycuda' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_asking_for_cuda_without_it_is_a_clear_error(no_pycuda):
    net = Net("p")
    net.add_external_input("x")
    net.Relu("x", "y")
    net.add_external_output("y")
    with pytest.raises(cuda.DeviceError, match="pycuda"):
        nb.Predictor(Net("init"), net, device="cuda")
    with pytest.raises(cuda.DeviceError, match="pycuda"):
        Workspace().feed_blob("x", np.ones(2), device="cuda:0")
    assert cuda.parse_device("gpu:2") == 2
    with pytest.raises(ValueError, match="expected 'cuda'"):
        cuda.parse_device("tpu")


def test_the_command_line_and_the_backend_say_what_is_missing(no_pycuda, model_dir, capsys):
    from netbrew.cli import main
    from netbrew.converters.onnx import backend

    assert main(["demo", "--device", "cuda", "-o", "unused"]) == 1
    assert "pycuda" in capsys.readouterr().err
    assert main(["bench", str(model_dir), "--device", "cuda:0"]) == 1
    assert "pycuda" in capsys.readouterr().err
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    assert not backend.supports_device("TPU")


def test_set_device_and_run_all_on_place_a_model():
    from netbrew import brew
    from netbrew.brew import ModelHelper
    from netbrew.executor import placement

    net = Net("n")
    net.Relu("x", "y")
    net.set_device("cuda:1")
    assert net.proto().device_option.device_id == 1 and placement.wants_gpu(net.proto())
    net.set_device(None)
    assert not placement.wants_gpu(net.proto())
    model = ModelHelper("m")
    brew.fc(model, "x", "fc", 2, 2)
    model.run_all_on("cuda:0")
    for n in (model.net, model.param_init_net):
        assert all(op.device_option.device_type == 1 for op in n.proto().op)
