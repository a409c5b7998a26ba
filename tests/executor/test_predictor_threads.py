"""Predictor.run from several threads at once gives the single-threaded results."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from netbrew.executor import Predictor
from netbrew.netdef import Net


def model(net_type: str) -> tuple[Net, Net]:
    rng = np.random.default_rng(1)
    init = Net("init")
    for name, shape in (("w1", (8, 16)), ("w2", (16, 4))):
        value = rng.normal(size=shape).astype(np.float32)
        init.GivenTensorFill([], name, shape=list(shape), values=value.ravel().tolist())
    net = Net("predict")
    net.add_external_input("data", "w1", "w2")
    h = net.MatMul(["data", "w1"], "h").Relu([], "h")  # in place: per-call blobs matter
    net.MatMul([h, "w2"], "logits").Softmax([], "prob")
    net.add_external_output("prob")
    net.set_type(net_type, num_workers=2 if net_type == "dag" else None)
    return init, net


@pytest.mark.parametrize("net_type", ["simple", "dag"])
def test_eight_threads_match_single_threaded_results(net_type):
    predictor = Predictor(*model(net_type))
    rng = np.random.default_rng(2)
    feeds = [rng.normal(size=(3, 8)).astype(np.float32) for _ in range(160)]
    expected = [predictor.run({"data": x})["prob"] for x in feeds]

    def worker(start: int) -> list[tuple[int, np.ndarray]]:
        return [(i, predictor.run({"data": feeds[i]})["prob"]) for i in range(start, 160, 8)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [r for part in pool.map(worker, range(8)) for r in part]
    assert len(results) == 160
    for i, prob in results:
        np.testing.assert_array_equal(prob, expected[i])


def test_run_leaves_the_shared_workspace_alone():
    predictor = Predictor(*model("simple"))
    before = predictor.workspace.blobs()
    predictor.run({"data": np.ones((2, 8), np.float32)})
    assert predictor.workspace.blobs() == before
    assert "h" not in before and "prob" not in before
