"""The six light-zoo models and the demo's training net on the GPU with strict placement:
every op runs a CUDA kernel, and the numbers match the CPU's."""

import sys
from pathlib import Path

import numpy as np
import pytest

import netbrew as nb
from netbrew.converters.onnx import import_model

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from zoo import LIGHT, dummy_inputs, model_path  # noqa: E402

sys.path.pop(0)


def without_final_softmax(predict):
    """The net answering its logits: the light models' weights are constants, so every
    logit is the same number up to summation order, and the softmax of such near-equal
    huge logits is rounding noise."""
    last = predict.op[-1]
    if last.type == "Softmax":
        outputs = [last.input[0] if o == last.output[0] else o for o in predict.external_output]
        del predict.op[-1]
        del predict.external_output[:]
        predict.external_output.extend(outputs)
    return predict


@pytest.mark.parametrize("name", LIGHT)
def test_light_zoo_model_runs_strictly_on_the_gpu(name):
    import onnx

    path = model_path(name)
    feeds = dummy_inputs(onnx.load(path))
    init, predict = import_model(path)
    predict = without_final_softmax(predict)
    cpu = nb.Predictor(init, predict)
    gpu = nb.Predictor(init, predict, device="cuda", strict=True)
    want, got = cpu.run(feeds), gpu.run(feeds)
    assert list(got) == list(want)
    for key, expected in want.items():
        scale = float(np.abs(expected).max()) or 1.0
        np.testing.assert_allclose(got[key], expected, rtol=1e-3, atol=1e-4 * scale, err_msg=key)


def test_the_demo_trains_strictly_on_the_gpu():
    """Five SGD steps of the demo's LeNet on the GPU match five on the CPU."""
    from netbrew.demo import training_model
    from netbrew.executor.placement import plan_placement

    rng = np.random.default_rng(0)
    data = rng.random((64, 1, 8, 8), dtype=np.float32)
    label = rng.integers(0, 10, 64).astype(np.int32)
    losses, start = {}, {}
    for device in ("cpu", "cuda:0"):
        model = training_model()
        if device != "cpu":
            model.run_all_on(device)
            for net in (model.param_init_net, model.net):
                plan_placement(net.proto(), device=device, strict=True)  # raises on a fallback
        ws = nb.Workspace()
        ws.run_net_once(model.param_init_net)
        for name in ws.blobs():  # the GPU's fillers draw other numbers: start from the CPU's
            if device == "cpu":
                start[name] = ws.fetch_blob(name)
            else:
                where = device if ws.blob_device(name) == "cuda" else None
                ws.feed_blob(name, start[name], device=where)
        ws.feed_blob("data", data, device=device)
        ws.feed_blob("label", label, device=device)
        ws.create_net(model.net)
        losses[device] = []
        if device != "cpu":  # the optimizer's updates run batched (executor/batching.py)
            from netbrew.executor.batching import OpBatch

            batches = [s for s in ws.get_net(model.net.name).steps if isinstance(s, OpBatch)]
            assert {b.ops[0].op.type for b in batches} >= {"MomentumSGDUpdate"}
        for _ in range(5):
            ws.run_net(model.net.name)
            losses[device].append(float(ws.fetch_blob("loss")))
    assert losses["cpu"][-1] < losses["cpu"][0]
    np.testing.assert_allclose(losses["cuda:0"], losses["cpu"], rtol=1e-3)
