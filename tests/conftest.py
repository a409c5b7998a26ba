"""Shared fixtures: paths to the real Caffe2 files in ../shared/data, a small model
folder for the command-line tests, and the benchmark scripts as modules."""

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
SQUEEZENET = SHARED_DATA / "caffe2_squeezenet"


@pytest.fixture
def squeezenet_dir() -> Path:
    if not (SQUEEZENET / "predict_net.pb").exists():
        pytest.skip(f"Caffe2 SqueezeNet files not found under {SQUEEZENET}")
    return SQUEEZENET


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A folder holding init_net.pb and predict_net.pb of tests.test_cli.build's LeNet-style
    net (1x6x6 images)."""
    from netbrew.netdef import save_net
    from tests.test_cli import build

    init, net = build()
    save_net(init, tmp_path / "model" / "init_net.pb")
    save_net(net, tmp_path / "model" / "predict_net.pb")
    return tmp_path / "model"


@pytest.fixture(scope="module")
def benchmark_module():
    """benchmark_module(name) imports benchmarks/<name>.py. The folder stays on sys.path for
    the module's tests, as the scripts import each other (and zoo's spawned workers import
    zoo) by name."""
    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield _load_benchmark
    finally:
        sys.path.remove(folder)


def _load_benchmark(name: str):
    """benchmarks/<name>.py as a module: imported by name where that name finds it (zoo's
    spawned workers import zoo so), else loaded by its path under a name of its own (a plain
    import of `cuda` or `distributed` finds the tests' folders of those names first)."""
    path = REPO / "benchmarks" / f"{name}.py"
    found = importlib.util.find_spec(name)
    if found is not None and found.origin == str(path):
        return importlib.import_module(name)
    spec = importlib.util.spec_from_file_location(f"netbrew_benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
