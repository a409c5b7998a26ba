"""`netbrew demo`: train a LeNet-style CNN on the bundled 8x8 digits, save, reload, verify.

Runs offline. It shows the framework end to end: a model built with brew, the backward
pass from autodiff, SGD with momentum as ops, a Workspace running the training net, a
model folder written with save_model, and a Predictor reloading it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.data import load_digits
from netbrew.executor import Workspace
from netbrew.netdef.model_dir import inference_net, load_model, save_model
from netbrew.progress import Progress


def lenet(model: ModelHelper, data: str = "data") -> str:
    """Two conv-relu-pool blocks and two FC layers for 1x8x8 images; returns the logits."""
    conv1 = brew.conv(model, data, "conv1", 1, 16, kernel=3, pad=1)
    pool1 = brew.max_pool(model, brew.relu(model, conv1, "relu1"), "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", 16, 32, kernel=3, pad=1)
    pool2 = brew.max_pool(model, brew.relu(model, conv2, "relu2"), "pool2", kernel=2, stride=2)
    fc3 = brew.relu(model, brew.fc(model, pool2, "fc3", 32 * 2 * 2, 64), "relu3")
    return brew.fc(model, fc3, "fc4", 64, 10)


def training_model(
    learning_rate: float = 0.05, db: str | None = None, db_type: str = "minidb", batch: int = 64
) -> ModelHelper:
    """LeNet with softmax, cross-entropy loss, accuracy, gradients and SGD with momentum.
    With `db`, the net reads its "data" and "label" batches from that DB (brew.db_input,
    this rank's shard under netbrew.distributed); else they are fed."""
    model = ModelHelper(name="lenet", seed=0)
    if db is not None:
        brew.db_input(model, ["data", "label"], batch, db, db_type, shard_by_rank=True)
    softmax = brew.softmax(model, lenet(model), "softmax")
    xent = model.net.LabelCrossEntropy([softmax, "label"], "xent")
    loss = model.net.AveragedLoss(xent, "loss")
    brew.accuracy(model, softmax, "label", "accuracy")
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, learning_rate, momentum=0.9, weight_decay=1e-4)
    return model


def split(seed: int = 0, test_fraction: float = 0.2):
    images, labels = load_digits()
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return images[train], labels[train], images[test], labels[test]


def train(
    model: ModelHelper, ws: Workspace, x, y, epochs: int, batch: int, seed: int = 0,
    progress: bool = True,
):  # fmt: skip
    """Runs the training net over shuffled batches, with a progress bar on the loss."""
    rng = np.random.default_rng(seed)
    steps = epochs * (len(y) // batch)
    bar = Progress(steps, "training", stream=None if progress else _Silent())
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for start in range(0, len(y) - batch + 1, batch):
            idx = order[start : start + batch]
            ws.feed_blob("data", x[idx])
            ws.feed_blob("label", y[idx])
            ws.run_net(model.net.name)
            step += 1
            bar.update(step, loss=float(ws.fetch_blob("loss")))
    bar.close()


class _Silent:
    """A stream that drops what is written (the progress bar of ranks other than 0)."""

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


def train_from_db(model: ModelHelper, ws: Workspace, steps: int, progress: bool = True):
    """Runs the training net `steps` times; its TensorProtosDBInput op reads each batch."""
    bar = Progress(steps, "training", stream=None if progress else _Silent())
    for step in range(1, steps + 1):
        ws.run_net(model.net.name)
        bar.update(step, loss=float(ws.fetch_blob("loss")))
    bar.close()


DB_TYPES = ("minidb", "lmdb")


def write_train_db(path: str, db_type: str, x, y) -> int:
    """Writes the training split to a new DB at `path` (a minidb file or an lmdb directory),
    one TensorProtos record (image, label) per example, as Caffe2's make_mnist_db did."""
    from netbrew.db import write_tensor_protos

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_tensor_protos(path, x, y, db_type=db_type)


def main(
    output: str = "netbrew_demo",
    epochs: int = 12,
    batch: int = 64,
    device: str = "cpu",
    db: str | None = None,
) -> int:
    """The demo; under `netbrew demo --workers N` each of the N ranks trains on its shard
    with batch // N images a step, the gradients averaged by Allreduce, and rank 0 reports.
    device="cuda" trains on the GPU (the model's ops placed there, the batches copied).
    db="minidb" or "lmdb" first writes the training split to a DB of that type in
    `output` and trains from it (brew.db_input, read ahead on a background thread)."""
    if db is not None and db not in DB_TYPES:
        raise ValueError(f"demo: db {db!r} is not one of {', '.join(DB_TYPES)}")
    from netbrew import distributed

    if device != "cpu":
        from netbrew.cuda import require

        device = f"cuda:{require(device)}"  # DeviceError says what is missing

    start = time.perf_counter()
    world = distributed.init()
    say = print if world.rank == 0 else (lambda *args: None)
    x_train, y_train, x_test, y_test = split()
    say(f"UCI digits: {len(y_train)} training and {len(y_test)} held-out 8x8 images")
    db_path = None
    if db is not None:
        db_path = str(Path(output) / f"train_{db}")
        if world.rank == 0:
            write_train_db(db_path, db, x_train, y_train)
            say(f"wrote the training split to {db} {Path(db_path).resolve()}")
        distributed.barrier()
    model = training_model(db=db_path, db_type=db or "minidb", batch=batch // world.size)
    if device != "cpu":
        model.run_all_on(device)
        say(f"training on {device}")
    if world.size > 1:
        say(f"data-parallel over {world.size} ranks, batch {batch // world.size} each")
        distributed.allreduce_gradients(model)
        distributed.broadcast_parameters(model)
        keep = len(y_train) // world.size * world.size  # equal shards: equal step counts
        x_train, y_train = distributed.shard((x_train[:keep], y_train[:keep]))
        batch //= world.size
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    if db_path is not None:  # the reader wraps around: every rank runs the same steps
        ws.create_net(model.net)
        train_from_db(model, ws, epochs * (len(y_train) // batch), progress=world.rank == 0)
        ws.fetch_blob(f"dbreader_{db_path}").item().close()  # stops the prefetch thread
    else:
        ws.feed_blob("data", x_train[:batch])
        ws.feed_blob("label", y_train[:batch])
        ws.create_net(model.net)
        train(model, ws, x_train, y_train, epochs, batch, progress=world.rank == 0)

    ws.create_net(inference_net(model.net, ["data"], ["softmax"], name="lenet_eval"))
    ws.feed_blob("data", x_test)
    ws.run_net("lenet_eval")
    probs = ws.fetch_blob("softmax")
    accuracy = float((probs.argmax(axis=1) == y_test).mean())

    folder = save_model(output, ws, model, inputs=["data"], outputs=["softmax"])  # rank 0
    reloaded = load_model(folder).run({"data": x_test})["softmax"]
    if not np.array_equal(reloaded, probs):
        raise AssertionError("the reloaded model's predictions differ from the trained model's")
    seconds = time.perf_counter() - start
    params = sum(ws.fetch_blob(p).size for p in model.get_trainable_params())
    say(f"held-out accuracy: {accuracy:.2%} ({len(y_test)} images)")
    say(f"model: {params:,} parameters, {len(model.net.ops)} ops in the training net")
    say(f"saved to {Path(folder).resolve()} (init_net.pb, predict_net.pb)")
    say("reloaded with load_model: predictions identical")
    say(f"time: {seconds:.1f} s")
    return 0
