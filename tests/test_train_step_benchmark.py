"""benchmarks/train_step.py: the brew and torch ResNet-18s are the same net, netbrew's step
trains, and the script prints both models' timings from alternating processes and ratios."""

import numpy as np
import pytest

from netbrew.executor import Workspace


@pytest.fixture(scope="module")
def train_step(benchmark_module):
    return benchmark_module("train_step")


def brew_param_sizes(train_step, widths) -> list[int]:
    model = train_step.training_model("resnet18", widths)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    return sorted(ws.fetch_blob(str(p)).size for p in model.get_trainable_params())


def test_resnet18_is_the_same_net_in_brew_and_torch(train_step):
    torch = pytest.importorskip("torch")
    full = train_step.torch_module("resnet18")
    assert sum(p.numel() for p in full.parameters()) == 11_173_962  # CIFAR ResNet-18
    widths = (8, 16, 32, 64)
    small = train_step.torch_module("resnet18", widths)
    assert brew_param_sizes(train_step, widths) == sorted(p.numel() for p in small.parameters())
    convs = [m for m in small.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 1 + 16 + 3  # stem, two per basic block, three projections


def test_netbrew_resnet18_step_lowers_the_loss(train_step):
    x, y = train_step.batch_of("resnet18", 8)
    step = train_step.netbrew_step("resnet18", x, y, widths=(4, 8, 16, 32))
    losses = [step() for _ in range(8)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]  # one fixed batch: SGD fits it


def test_main_prints_alternating_times_and_ratios(train_step, capsys):
    pytest.importorskip("torch")
    args = ["--steps", "2", "--warmup", "1", "--batch", "4", "--width", "4", "--threads", "1"]
    assert train_step.main([*args, "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("lenet", "resnet18"):
        head = f"{name} training step, batch 4, 1 threads, 2 steps each in 2 alternating processes"
        block = out.split(head)[1]
        lines = block.splitlines()[1:4]
        assert lines[0].split()[0] == "netbrew" and lines[1].split()[0] == "PyTorch"
        ours, theirs = float(lines[0].split()[2]), float(lines[1].split()[2])
        ratio = float(lines[2].split("ratio netbrew/PyTorch: ")[1].split()[0])
        assert ratio == pytest.approx(ours / theirs, rel=0.02, abs=0.01)


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_split_batches_train_the_same_weights(train_step, monkeypatch, net_type):
    """Every conv of a small ResNet-18 split over the cores (batch_split.MIN_WORK forced
    down), under `simple` and under `dag`'s two workers: three SGD steps end at the weights
    the whole-batch convs reach."""
    from netbrew.operators import batch_split

    x, y = train_step.batch_of("resnet18", 6)
    weights = []
    for least in (1 << 60, 1):
        monkeypatch.setattr(batch_split, "MIN_WORK", least)
        model, ws = train_step.netbrew_workspace("resnet18", x, y, (4, 8, 16, 32), net_type)
        for _ in range(3):
            ws.run_net(model.net.name)
        weights.append({str(p): ws.fetch_blob(str(p)) for p in model.get_trainable_params()})
    whole, split = weights
    assert whole.keys() == split.keys()
    for name, w in whole.items():
        np.testing.assert_allclose(split[name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_torch_gets_the_openmp_environment_the_script_started_with(train_step, monkeypatch):
    """netbrew's import sets OpenMP's wait for numba; a spawned child inherits that, so the
    parent hands torch's process the values it started with (torch's LeNet step took 2.6x
    as long under netbrew's OMP_WAIT_POLICY=PASSIVE)."""
    import os

    import netbrew.jit  # noqa: F401  (has set netbrew's OpenMP variables by now)

    assert set(train_step.STARTED_WITH) == {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv("GOMP_SPINCOUNT", "10000")
    train_step.restore_environment({"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "300000"})
    assert "OMP_WAIT_POLICY" not in os.environ
    assert os.environ["GOMP_SPINCOUNT"] == "300000"
