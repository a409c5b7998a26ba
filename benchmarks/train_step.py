"""Time training steps in netbrew and in PyTorch CPU: the demo's LeNet (batch 64 on 8x8
digits) and a ResNet-18-sized net (batch 32 on 32x32 images).

Each net is built twice, with brew in netbrew and as an nn.Module in torch, with the same
layers and the same step: softmax cross-entropy, SGD with Nesterov momentum 0.9 and weight
decay 1e-4 (the demo's build_sgd), learning rate 0.05, on the same data with the same thread
count (--threads: the BLAS behind NumPy, numba and torch.set_num_threads).

Each runtime times its steps in its own spawned process, in alternating rounds (netbrew,
then torch, --rounds times), as benchmarks/zoo.py does: so a slow spell of a shared machine
falls on both, and neither one's idle OpenMP threads spin on the cores the other needs.
netbrew sets OpenMP's wait for numba (netbrew.jit: GOMP_SPINCOUNT, or OMP_WAIT_POLICY=PASSIVE
where OpenBLAS keeps its own threads); torch's process gets the values this script started
with, handed to it by the parent (a spawned child inherits the parent's environment after
netbrew changed it; torch under PASSIVE ran LeNet's step 2.6x slower). Prints medians,
fastest steps and netbrew/PyTorch ratios.

resnet18 is the CIFAR form of ResNet-18: a 3x3 stem of 64 without max pooling, basic blocks
[2, 2, 2, 2] of widths 64, 128, 256, 512 (stride 2 and a 1x1 projection at the start of
the last three stages), BatchNorm and Relu, global average pooling and a 10-way FC; 11.2M
parameters.

    python benchmarks/train_step.py [--threads 2] [--steps 20] [--rounds 2]
        [--models lenet resnet18]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence

OPENMP_WAIT = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
STARTED_WITH = {v: os.environ.get(v) for v in OPENMP_WAIT}  # before netbrew.jit sets them

import numpy as np  # noqa: E402

from netbrew import brew  # noqa: E402
from netbrew.brew import ModelHelper  # noqa: E402
from netbrew.executor import Workspace  # noqa: E402

MODELS = ("lenet", "resnet18")
BATCH = {"lenet": 64, "resnet18": 32}
WIDTHS = (64, 128, 256, 512)
TARGET = {"lenet": 1.2, "resnet18": 1.5}  # issue 24's acceptance ratios
LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 1e-4


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per runtime")
    parser.add_argument("--rounds", type=int, default=2, help="processes per runtime")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument(
        "--batch", type=int, help="batch size for every model (default: lenet 64, resnet18 32)"
    )
    parser.add_argument(
        "--width", type=int, default=64, help="resnet18's first width (64; smaller for tests)"
    )
    return parser.parse_args(argv)


def resnet18(model: ModelHelper, data: str, widths: Sequence[int] = WIDTHS) -> str:
    """The CIFAR ResNet-18 in brew; returns the logits blob."""

    def conv_bn(x: str, name: str, cin: int, cout: int, kernel: int, stride: int = 1) -> str:
        y = brew.conv(model, x, name, cin, cout, kernel, stride=stride, pad=kernel // 2,
                      no_bias=True)  # fmt: skip
        return brew.spatial_bn(model, y, f"{name}_bn", cout)

    x = brew.relu(model, conv_bn(data, "stem", 3, widths[0], 3), "stem_relu")
    cin = widths[0]
    for stage, width in enumerate(widths):
        for block in range(2):
            name, stride = f"s{stage}b{block}", 2 if stage and not block else 1
            y = brew.relu(model, conv_bn(x, f"{name}_c1", cin, width, 3, stride), f"{name}_r1")
            y = conv_bn(y, f"{name}_c2", width, width, 3)
            skip = x if stride == 1 and cin == width else conv_bn(x, f"{name}_p", cin, width, 1,
                                                                  stride)  # fmt: skip
            x = brew.relu(model, brew.sum(model, [y, skip], f"{name}_sum"), f"{name}_out")
            cin = width
    pooled = brew.global_avg_pool(model, x, "pool")
    return brew.fc(model, brew.flatten(model, pooled, "flat"), "logits", cin, 10)


def training_model(name: str, widths: Sequence[int] = WIDTHS) -> ModelHelper:
    """`name`'s net with the demo's loss, accuracy, gradients and SGD step."""
    if name == "lenet":
        from netbrew.demo import training_model as lenet_training_model

        return lenet_training_model(learning_rate=LR)
    model = ModelHelper(name=name, seed=0)
    softmax = brew.softmax(model, resnet18(model, "data", widths), "softmax")
    xent = model.net.LabelCrossEntropy([softmax, "label"], "xent")
    loss = model.net.AveragedLoss(xent, "loss")
    brew.accuracy(model, softmax, "label", "accuracy")
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    return model


def netbrew_workspace(
    name: str, x: np.ndarray, y: np.ndarray, widths=WIDTHS, net_type: str | None = None
) -> tuple[ModelHelper, Workspace]:
    """`name`'s training model and a Workspace holding its initialized parameters, the batch
    (x, y) and its training net, created as a `net_type` net if given (dag: 2 workers)."""
    model = training_model(name, widths)
    if net_type:
        model.net.set_type(net_type, num_workers=2 if net_type == "dag" else None)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x)
    ws.feed_blob("label", y)
    ws.create_net(model.net)
    return model, ws


def netbrew_step(name: str, x: np.ndarray, y: np.ndarray, widths=WIDTHS) -> Callable[[], float]:
    """A function that runs one training step of `name` and returns its loss."""
    model, ws = netbrew_workspace(name, x, y, widths)

    def step() -> float:
        ws.run_net(model.net.name)
        return float(ws.fetch_blob("loss"))

    return step


def torch_module(name: str, widths: Sequence[int] = WIDTHS):
    from torch import nn

    if name == "lenet":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10),
        )  # fmt: skip

    def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1):
        conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)
        return nn.Sequential(conv, nn.BatchNorm2d(cout, momentum=0.1))  # netbrew's 0.9

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1, self.c2 = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3)
            self.skip = conv_bn(cin, cout, 1, stride) if stride > 1 or cin != cout else None

        def forward(self, x):
            y = self.c2(self.c1(x).relu())
            return (y + (x if self.skip is None else self.skip(x))).relu()

    layers, cin = [conv_bn(3, widths[0], 3), nn.ReLU()], widths[0]
    for stage, width in enumerate(widths):
        layers += [Block(cin, width, 2 if stage else 1), Block(width, width, 1)]
        cin = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*layers)


def torch_step(name: str, x: np.ndarray, y: np.ndarray, widths=WIDTHS) -> Callable[[], float]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = torch_module(name, widths).train()
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM,
                          weight_decay=WEIGHT_DECAY, nesterov=True)  # fmt: skip
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def step() -> float:
        opt.zero_grad()
        logits = net(tx)
        loss = nn.functional.cross_entropy(logits, ty)
        (logits.argmax(1) == ty).float().mean()  # the netbrew net computes accuracy too
        loss.backward()
        opt.step()
        return loss.item()

    return step


def batch_of(name: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "lenet":
        from netbrew.demo import split

        x_train, y_train, _, _ = split()
        return x_train[:batch], y_train[:batch]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    return x, rng.integers(0, 10, batch).astype(np.int32)


def restore_environment(values: dict[str, str | None]) -> None:
    """Sets each variable to its value, or unsets it where the value is None."""
    for var, value in values.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def worker(
    runtime: str, name: str, batch: int, widths, steps: int, args, started_with, queue
) -> None:
    """In a spawned process: time `steps` steps of `runtime` after the warm-up ones.
    `started_with` is the OpenMP environment the parent script started with."""
    if runtime == "PyTorch":  # torch's OpenMP reads these when torch loads
        restore_environment(started_with)
    try:
        with threads(args.threads):
            x, y = batch_of(name, batch)
            step = (netbrew_step if runtime == "netbrew" else torch_step)(name, x, y, widths)
            for _ in range(args.warmup):
                step()
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
        queue.put(("ok", times))
    except ImportError as e:
        queue.put(("missing", str(e)))
    except Exception as e:  # reported by the parent, which names the runtime
        queue.put(("error", f"{type(e).__name__}: {e}"))


def rounds(name: str, batch: int, widths, args) -> dict[str, list[float]]:
    """runtime -> step seconds, from args.rounds alternating processes per runtime."""
    ctx = mp.get_context("spawn")
    per_round = max(1, -(-args.steps // args.rounds))
    times: dict[str, list[float]] = {"netbrew": [], "PyTorch": []}
    for r in range(args.rounds):
        for runtime in list(times):
            queue = ctx.Queue()
            proc = ctx.Process(
                target=worker,
                args=(runtime, name, batch, widths, per_round, args, STARTED_WITH, queue),
            )
            proc.start()
            status, value = queue.get()
            proc.join()
            if status == "missing" and runtime == "PyTorch":
                print("PyTorch is not installed: pip install torch==2.13.0 for the comparison")
                del times[runtime]
            elif status != "ok":
                raise RuntimeError(f"{runtime} {name} step failed in its process: {value}")
            else:
                times[runtime] += value
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
    return times


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """n threads for the BLAS behind NumPy, numba's parallel loops and torch (if present),
    inside the block."""
    from netbrew.executor import num_threads

    with contextlib.ExitStack() as stack:
        stack.enter_context(num_threads(n))
        try:
            import numba

            before = numba.get_num_threads()
            numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
            stack.callback(numba.set_num_threads, before)
        except ImportError:
            pass
        try:
            import torch

            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(n)
        except ImportError:
            pass
        yield


def main(argv=None) -> int:
    run(parse(argv))
    return 0


def run(args: argparse.Namespace) -> None:
    widths = tuple(args.width * 2**i for i in range(4))
    for name in args.models:
        batch = args.batch or BATCH[name]
        print(f"{name} training step, batch {batch}, {args.threads} threads, {args.steps} "
              f"steps each in {args.rounds} alternating processes")  # fmt: skip
        times = rounds(name, batch, widths, args)
        for runtime, ts in times.items():
            print(f"  {runtime:<8} median {statistics.median(ts) * 1e3:9.2f} ms, "
                  f"fastest {min(ts) * 1e3:9.2f} ms")  # fmt: skip
        if "PyTorch" in times:
            ours, theirs = times["netbrew"], times["PyTorch"]
            ratio = statistics.median(ours) / statistics.median(theirs)
            print(f"  ratio netbrew/PyTorch: {ratio:.2f} (fastest steps "
                  f"{min(ours) / min(theirs):.2f}; target <= {TARGET[name]})")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
