"""`dag` (2 workers) against `simple`: a wide net of 8 independent branches and inception_v1.

BLAS is limited to one thread (set before NumPy loads), so the parallelism measured is
the executor's. Prints medians and the simple/dag speed-up for each net.

    python benchmarks/dag.py [--reps 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

from netbrew.converters.onnx.backend import prepare  # noqa: E402
from netbrew.executor import Workspace  # noqa: E402
from netbrew.netdef import Net  # noqa: E402


def wide_net(kind: str) -> tuple[Net, dict[str, np.ndarray]]:
    """8 branches of Conv -> Relu -> MatMul -> Tanh -> Mul, summed at the end."""
    rng = np.random.default_rng(0)
    net, feeds = Net(f"wide_{kind}"), {"x": rng.normal(size=(1, 32, 64, 64)).astype(np.float32)}
    outs = []
    for b in range(8):
        feeds[f"w{b}"] = rng.normal(size=(32, 32, 3, 3)).astype(np.float32) * 0.1
        feeds[f"m{b}"] = rng.normal(size=(64, 64)).astype(np.float32) * 0.1
        c = net.Conv(["x", f"w{b}"], f"c{b}", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        t = net.MatMul([c.Relu([], f"r{b}"), f"m{b}"], f"mm{b}").Tanh([], f"t{b}")
        outs.append(net.Mul([t, t], f"o{b}"))
    net.Sum(outs, "y")
    net.add_external_input(*feeds)
    net.add_external_output("y")
    net.set_type(kind, num_workers=2 if kind == "dag" else None)
    return net, feeds


def time_run(run, reps: int) -> float:
    run()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def wide(reps: int) -> tuple[float, float]:
    result = []
    for kind in ("simple", "dag"):
        net, feeds = wide_net(kind)
        ws = Workspace()
        for name, value in feeds.items():
            ws.feed_blob(name, value)
        ws.create_net(net)
        result.append(time_run(lambda n=net.name, w=ws: w.run_net(n), reps))
    return result[0], result[1]


def inception(reps: int) -> tuple[float, float]:
    import onnx.backend.test
    from onnx.backend.test.runner import Runner

    path = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light",
                        "light_inception_v1.onnx")  # fmt: skip
    import onnx

    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    graph_inputs = [x for x in model.graph.input if x.name not in inits]
    inputs = {
        x.name: Runner.generate_dummy_data(x, seed=i, random=True)
        for i, x in enumerate(graph_inputs)
    }
    result = []
    for kind in ("simple", "dag"):
        rep = prepare(model)
        rep.runtime.net.type = kind  # same ops, other runtime
        from netbrew.executor.runtime import RUNTIMES

        rep.runtime = RUNTIMES[kind](rep.runtime.net, rep.runtime.ops)
        result.append(time_run(lambda r=rep: r.run(inputs), reps))
    return result[0], result[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    ns = parser.parse_args()
    for name, bench in (("wide net (8 branches)", wide), ("inception_v1", inception)):
        print(f"{name}: running...", file=sys.stderr)
        simple, dag = bench(ns.reps)
        print(f"{name:<24} simple {simple * 1e3:8.2f} ms   dag {dag * 1e3:8.2f} ms   "
              f"speed-up {simple / dag:.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
