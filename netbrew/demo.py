"""`netbrew demo`: build a small CNN with the Net API, run it, save it, reload it, verify.

Runs offline in a second or two. It shows the whole foundation end to end: op creation
checked against the schema registry, the init_net/predict_net pair, the Workspace,
binary and text serialization, and the Predictor.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from netbrew.executor import Predictor, Workspace
from netbrew.netdef import Net, load_net, save_net


def build(seed: int = 0) -> tuple[Net, Net]:
    """A LeNet-style inference net for 1x6x6 images and its init net."""
    rng = np.random.default_rng(seed)
    init, net = Net("demo_init"), Net("demo")
    params = {
        "conv1_w": rng.normal(0, 0.3, (8, 1, 3, 3)),
        "conv1_b": np.zeros(8),
        "fc_w": rng.normal(0, 0.1, (10, 8 * 3 * 3)),
        "fc_b": np.zeros(10),
    }
    for name, value in params.items():
        init.GivenTensorFill([], name, shape=list(value.shape), values=value.ravel().tolist())
    net.add_external_input("data", *params)
    conv = net.Conv(["data", "conv1_w", "conv1_b"], "conv1", kernel_shape=[3, 3], pads=[1] * 4)
    pool = conv.Relu([], "relu1").MaxPool([], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    fc = net.FC([pool, "fc_w", "fc_b"], "fc")
    fc.Softmax([], "prob")
    net.add_external_output("prob")
    return init, net


def main(output: str = "netbrew_demo") -> int:
    start = time.perf_counter()
    init, net = build()
    net.lint()
    print(net)
    x = np.random.default_rng(1).uniform(0, 1, (4, 1, 6, 6)).astype(np.float32)

    ws = Workspace()
    ws.run_net_once(init)
    ws.feed_blob("data", x)
    ws.create_net(net)
    ws.run_net("demo")
    prob = ws.fetch_blob("prob")

    folder = Path(output)
    save_net(init, folder / "init_net.pb")
    save_net(net, folder / "predict_net.pb")
    save_net(net, folder / "predict_net.pbtxt")
    reloaded = Predictor(load_net(folder / "init_net.pb"), load_net(folder / "predict_net.pb"))
    again = reloaded.run({"data": x})["prob"]
    if not np.array_equal(prob, again):
        raise AssertionError("reloaded model gives different outputs")
    if not np.allclose(prob.sum(axis=1), 1.0, atol=1e-5):
        raise AssertionError("softmax rows do not sum to 1")
    print(f"\nran {len(net.ops)} ops on a batch of {len(x)}: classes {prob.argmax(axis=1)}")
    print(f"saved, reloaded and matched bit for bit: {folder.resolve()}")
    print(f"done in {time.perf_counter() - start:.2f} s")
    return 0
