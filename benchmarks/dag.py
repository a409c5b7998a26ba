"""`dag` (2 workers) against `simple`: a wide net of 8 independent branches and inception_v1
(with --zoo, all six of onnx's light model-zoo models).

BLAS is limited to one thread (set before NumPy loads), so the parallelism measured is
the executor's. The two runtimes run alternately; prints medians and the simple/dag
speed-up for each net.

The wide net also gets its ceiling: the same compiled ops with no scheduler, branches 0-3
on one plain thread and 4-7 on another, against all eight on one. That is what two
threads give these kernels on this machine (shared caches, the GIL's share of each op);
`dag` cannot beat it.

    python benchmarks/dag.py [--reps 20] [--zoo]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
from zoo import MODELS, dummy_inputs, model_path  # noqa: E402  (benchmarks/zoo.py)

from netbrew.converters.onnx.backend import prepare  # noqa: E402
from netbrew.executor import Workspace  # noqa: E402
from netbrew.executor.dag import TUNING_RUNS  # noqa: E402
from netbrew.netdef import Net  # noqa: E402


def wide_net(kind: str, channels: int = 32, size: int = 64) -> tuple[Net, dict[str, np.ndarray]]:
    """8 branches of Conv -> Relu -> MatMul -> Tanh -> Mul, summed at the end."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, channels, size, size)).astype(np.float32)
    net, feeds = Net(f"wide_{kind}"), {"x": x}
    outs = []
    for b in range(8):
        feeds[f"w{b}"] = rng.normal(size=(channels, channels, 3, 3)).astype(np.float32) * 0.1
        feeds[f"m{b}"] = rng.normal(size=(size, size)).astype(np.float32) * 0.1
        c = net.Conv(["x", f"w{b}"], f"c{b}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        t = net.MatMul([c.Relu([], f"r{b}"), f"m{b}"], f"mm{b}").Tanh([], f"t{b}")
        outs.append(net.Mul([t, t], f"o{b}"))
    net.Sum(outs, "y")
    net.add_external_input(*feeds)
    net.add_external_output("y")
    net.set_type(kind, num_workers=2 if kind == "dag" else None)
    return net, feeds


def time_pair(runs: tuple, reps: int) -> tuple[float, float]:
    """Median seconds of each of two runs, timed alternately so that load on the machine
    falls on both alike, after warm-up runs that cover the dag runtime's mode tuning."""
    for _ in range(2 * (TUNING_RUNS + 1)):
        for run in runs:
            run()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(reps):
        for run, out in zip(runs, times):
            start = time.perf_counter()
            run()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def wide(reps: int) -> tuple[float, float, str]:
    runs, ws = [], Workspace()
    for kind in ("simple", "dag"):
        net, feeds = wide_net(kind)
        for name, value in feeds.items():
            ws.feed_blob(name, value)
        ws.create_net(net)
        runs.append(lambda n=net.name: ws.run_net(n))
    return (*time_pair(tuple(runs), reps), f"dag chose {ws.get_net('wide_dag').mode}")


def ceiling_runs(pool: ThreadPoolExecutor) -> tuple[Callable, Callable, dict[str, Any]]:
    """The wide net's branch ops run by hand, with no scheduler: all on this thread, or
    branches 0-3 here and 4-7 on `pool`'s thread. Returns both runs and their blobs."""
    ws = Workspace()
    net, feeds = wide_net("simple")
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.create_net(net)
    blobs = {name: ws.fetch_blob(name) for name in feeds}
    branch = [op for op in ws.get_net(net.name).ops if op.op.type != "Sum"]
    halves = branch[: len(branch) // 2], branch[len(branch) // 2 :]

    def run(ops: list) -> None:
        for op in ops:
            op.run(blobs)

    def two_threads() -> None:
        other = pool.submit(run, halves[1])
        run(halves[0])
        other.result()

    return (lambda: run(branch)), two_threads, blobs


def wide_ceiling(reps: int) -> tuple[float, float, str]:
    with ThreadPoolExecutor(1) as pool:
        one, two, _ = ceiling_runs(pool)
        return (*time_pair((one, two), reps), "no scheduler")


def zoo_model(name: str):
    """A bench for one of onnx's light model-zoo models, prepared once per runtime, on the
    inputs benchmarks/zoo.py uses."""

    def bench(reps: int) -> tuple[float, float, str]:
        import onnx

        model = onnx.load(model_path(name))
        inputs = dummy_inputs(model)
        reps_ = [prepare(model, net_type=kind) for kind in ("simple", "dag")]
        times = time_pair(tuple(lambda r=r: r.run(inputs) for r in reps_), reps)
        return (*times, f"dag chose {reps_[1].runtime.mode}")

    return bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument(
        "--zoo", action="store_true", help="all six zoo models, not only inception_v1"
    )
    ns = parser.parse_args()
    models = MODELS if ns.zoo else ("inception_v1",)
    runtimes = ("simple", "dag")
    benches = [
        ("wide net (8 branches)", wide, runtimes),
        ("wide net, ceiling", wide_ceiling, ("1 thread", "2 threads")),
        *((m, zoo_model(m), runtimes) for m in models),
    ]
    for name, bench, (one, two) in benches:
        print(f"{name}: running...", file=sys.stderr)
        first, second, note = bench(ns.reps)
        print(f"{name:<24} {one} {first * 1e3:8.2f} ms   {two} {second * 1e3:8.2f} ms   "
              f"speed-up {first / second:.2f}x   ({note})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
