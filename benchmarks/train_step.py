"""Time one training step of the demo's LeNet (batch 64) in netbrew and in PyTorch CPU.

Both run in this process, on the same data, with the same thread count (--threads, set
for BLAS/OpenMP before NumPy loads and for torch.set_num_threads). Prints medians and
the netbrew/PyTorch ratio.

    python benchmarks/train_step.py [--threads 2] [--steps 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    return parser.parse_args()


ARGS = parse()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

from netbrew.demo import split, training_model  # noqa: E402
from netbrew.executor import Workspace  # noqa: E402


def time_steps(step, n: int) -> float:
    for _ in range(5):
        step()
    times = []
    for i in range(n):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
        if i % max(1, n // 5) == 0:
            print(f"  step {i + 1}/{n}", file=sys.stderr)
    return statistics.median(times)


def netbrew_step(x: np.ndarray, y: np.ndarray):
    model = training_model()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x)
    ws.feed_blob("label", y)
    ws.create_net(model.net)
    return lambda: ws.run_net(model.net.name)


def torch_step(x: np.ndarray, y: np.ndarray):
    import torch
    from torch import nn

    torch.set_num_threads(ARGS.threads)
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))

    def step():
        opt.zero_grad()
        logits = net(tx)
        loss = nn.functional.cross_entropy(logits, ty)
        (logits.argmax(1) == ty).float().mean()  # the netbrew net computes accuracy too
        loss.backward()
        opt.step()

    return step


def main() -> int:
    x_train, y_train, _, _ = split()
    x, y = x_train[: ARGS.batch], y_train[: ARGS.batch]
    print(f"LeNet training step, batch {ARGS.batch}, {ARGS.threads} threads, median of "
          f"{ARGS.steps}")  # fmt: skip
    ours = time_steps(netbrew_step(x, y), ARGS.steps)
    print(f"netbrew: {ours * 1e3:8.2f} ms")
    try:
        theirs = time_steps(torch_step(x, y), ARGS.steps)
    except ImportError:
        print("PyTorch is not installed: pip install torch==2.13.0 for the comparison")
        return 0
    print(f"PyTorch: {theirs * 1e3:8.2f} ms")
    print(f"ratio netbrew/PyTorch: {ours / theirs:.2f} (target <= 2.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
