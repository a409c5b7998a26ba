"""benchmarks/cuda.py without a GPU: it says what is missing and exits 2; its ResNet-18-sized
net builds and trains on the CPU, and its table's ratios come from its figures."""

import subprocess
import sys
import time

import numpy as np
import pytest

from netbrew import cuda


@pytest.fixture(scope="module")
def bench(benchmark_module):
    return benchmark_module("cuda")


@pytest.mark.skipif(cuda.is_available(), reason="a GPU is here: the benchmark would run")
def test_without_a_gpu_it_exits_saying_why():
    done = subprocess.run([sys.executable, "benchmarks/cuda.py"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "benchmarks/cuda.py needs a GPU" in done.stderr


def test_the_resnet18_sized_net_trains_on_the_cpu(bench):
    from netbrew import brew
    from netbrew.brew import ModelHelper
    from netbrew.executor import Workspace

    model = ModelHelper("r18", seed=0)
    softmax = brew.softmax(model, bench.resnet18_like(model), "softmax")
    xent = model.net.LabelCrossEntropy([softmax, "label"], "xent")
    model.add_gradient_operators([model.net.AveragedLoss(xent, "loss")])
    brew.optimizer.build_sgd(model, 0.05, momentum=0.9)
    params = sum(int(np.prod(s)) for p, s in model.param_shapes.items() if p in model.params)
    assert 11_000_000 < params < 11_300_000  # ResNet-18's 11.2 M for 10 classes
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", np.random.default_rng(0).random((2, 3, 32, 32), dtype=np.float32))
    ws.feed_blob("label", np.array([1, 2], np.int32))
    ws.create_net(model.net)
    ws.run_net(model.net.name)
    assert ws.fetch_blob("softmax").shape == (2, 10)


def test_table(bench):
    row = {"what": "x", "netbrew_ms": 3.0, "torch_ms": 2.0, "ratio": 1.6, "torch_tf32_ms": 1.25,
           "netbrew_mib": 10, "torch_mib": 8}  # fmt: skip
    assert "| x | 3.00 | 2.00 | 1.60 | 1.25 | 10 | 8 |" in bench.render([row], "GPU")


def test_the_two_sides_alternate_and_the_ratio_is_the_rounds_median(bench):
    calls = []

    def side(name, ms):
        def step():
            calls.append(name)
            time.sleep(ms[len([c for c in calls if c == name]) % len(ms)] / 1e3)

        return step, lambda: None

    ours, theirs, ratio = bench.paired_ms(side("a", [4.0]), side("b", [2.0]), reps=2, rounds=3)
    assert calls == ["a"] * 4 + ["b"] * 4 + (["a"] * 3 + ["b"] * 3) * 3  # warm-up, rounds
    assert 3.5 < ours < 6 and 1.5 < theirs < 3.5
    assert 1.3 < ratio < 2.7


def test_any_batch_lets_light_resnet50_take_a_batch(bench):
    import onnx

    import netbrew as nb
    from netbrew.converters.onnx import import_model

    sys.path.insert(0, "benchmarks")
    try:
        from zoo import model_path
    finally:
        sys.path.pop(0)
    predictor = nb.Predictor(*import_model(bench.any_batch(onnx.load(model_path("resnet50")))))
    x = np.random.default_rng(0).random((2, 3, 224, 224), dtype=np.float32)
    (out,) = predictor.run({predictor.input_names[0]: x}).values()
    assert out.shape == (2, 1000)


def test_the_resnet18_sized_steps_optimizer_runs_in_four_launches_on_a_gpu(bench, monkeypatch):
    """Placed on a GPU (the parameters there, as after param_init_net), the step's 38
    WeightedSums and 56 MomentumSGDUpdates run as two batches, 32 tensors a launch."""
    from netbrew import brew
    from netbrew.brew import ModelHelper
    from netbrew.executor.batching import OpBatch
    from netbrew.executor.placement import plan_placement
    from netbrew.executor.runtime import create_runtime
    from netbrew.operators.cuda.optim import MULTI

    model = ModelHelper("r18_gpu", seed=0)
    softmax = brew.softmax(model, bench.resnet18_like(model), "softmax")
    xent = model.net.LabelCrossEntropy([softmax, "label"], "xent")
    model.add_gradient_operators([model.net.AveragedLoss(xent, "loss")])
    brew.optimizer.build_sgd(model, 0.05, momentum=0.9, weight_decay=1e-4)
    model.run_all_on("cuda:0")
    init = model.param_init_net.proto()
    made = {name for op in init.op for name in op.output}
    placed = plan_placement(model.net.proto(), params=made, params_device="cuda:0").net
    monkeypatch.setenv("NETBREW_BATCH_OPS", "1")
    runtime = create_runtime(placed)  # compiles the CUDA kernels' launch code, runs nothing
    batches = [s for s in runtime.steps if isinstance(s, OpBatch)]
    assert [(b.ops[0].op.type, len(b.ops)) for b in batches] == [
        ("WeightedSum", 38),
        ("MomentumSGDUpdate", 56),
    ]
    assert sum(-(-len(b.ops) // MULTI) for b in batches) == 4
    assert len(runtime.steps) == len(runtime.ops) - 94 + 2
