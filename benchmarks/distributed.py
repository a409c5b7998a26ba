"""Data-parallel training on MPI: throughput on 1 and 2 ranks, and netbrew's Allreduce op
beside mpi4py's raw Allreduce on the same buffers.

Every rank runs with one BLAS thread. Throughput is training images per second of the
demo's CNN, `--batch` images per rank per step (so 2 ranks do twice the work per step).
The Allreduce rows time 1 MB and 25 MB float32 buffers: netbrew's Allreduce op run through
a Workspace (its bucket copy, fingerprint check and polling included) against
`comm.Allreduce(send, recv)`, alternating, medians of --reps.

    python benchmarks/distributed.py [--steps 300] [--batch 64] [--reps 20]

Writes benchmarks/DISTRIBUTED.md. Needs mpi4py and an mpiexec (netbrew[distributed]).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

HERE = Path(__file__).resolve().parent


def throughput(steps: int, batch: int) -> dict:
    """Images per second of this job (all ranks), measured on rank 0 after a warm-up."""
    import numpy as np

    from netbrew import distributed
    from netbrew.demo import split, training_model
    from netbrew.executor import Workspace

    world = distributed.init()
    model = training_model()
    if world.size > 1:
        distributed.allreduce_gradients(model)
        distributed.broadcast_parameters(model)
    x, y, _, _ = split()
    rng = np.random.default_rng(world.rank)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    ws.feed_blob("data", x[:batch])
    ws.feed_blob("label", y[:batch])
    ws.create_net(model.net)
    for step in range(steps + 5):
        if step == 5:
            distributed.barrier()
            start = time.perf_counter()
        pick = rng.choice(len(y), batch, replace=False)
        ws.feed_blob("data", x[pick])
        ws.feed_blob("label", y[pick])
        ws.run_net(model.net.name)
    distributed.barrier()
    seconds = time.perf_counter() - start
    return {"ranks": world.size, "images_per_s": steps * batch * world.size / seconds}


def allreduce_times(reps: int) -> list[dict]:
    """Medians (ms) of netbrew's Allreduce op and mpi4py's Allreduce, per buffer size."""
    import numpy as np

    from netbrew import distributed
    from netbrew.executor import Workspace
    from netbrew.netdef import Net

    world = distributed.init()
    rows = []
    for megabytes in (1, 25):
        n = megabytes * (1 << 20) // 4
        buffer = np.random.default_rng(world.rank).random(n, dtype=np.float32)
        ws, net = Workspace(), Net(f"allreduce_{megabytes}mb")
        ws.feed_blob("g", buffer.copy())
        net.Allreduce("g", "g")  # in place, as allreduce_gradients' ops run
        ws.create_net(net)
        rows.append({"mb": megabytes, **_time_allreduce(ws, net.name, buffer, reps)})
    return rows


def _time_allreduce(ws, net_name: str, buffer, reps: int) -> dict:
    """Alternating runs of the three ways to reduce `buffer`; the op's result is checked."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    recv, inplace = np.empty_like(buffer), buffer.copy()
    ws.run_net(net_name)
    comm.Allreduce(buffer, recv, op=MPI.SUM)
    assert np.array_equal(ws.fetch_blob("g"), recv)
    steps = {
        "netbrew_ms": lambda: ws.run_net(net_name),
        "mpi4py_ms": lambda: comm.Allreduce(buffer, recv, op=MPI.SUM),
        "mpi4py_in_place_ms": lambda: comm.Allreduce(MPI.IN_PLACE, inplace, op=MPI.SUM),
    }
    times: dict[str, list[float]] = {key: [] for key in steps}
    for _ in range(reps + 2):
        for key, step in steps.items():
            comm.Barrier()
            start = time.perf_counter()
            step()
            times[key].append(time.perf_counter() - start)
    return {key: 1e3 * statistics.median(values[2:]) for key, values in times.items()}


def child(args) -> None:
    """Runs inside a job: prints one JSON line from rank 0."""
    from netbrew import distributed

    result = {"throughput": throughput(args.steps, args.batch)}
    if distributed.world_size() > 1:
        result["allreduce"] = allreduce_times(args.reps)
    if distributed.rank() == 0:
        print(json.dumps(result), flush=True)


def run_job(ranks: int, args) -> dict:
    from netbrew.distributed.launch import find_mpiexec

    command = [sys.executable, __file__, "--child", "--steps", str(args.steps),
               "--batch", str(args.batch), "--reps", str(args.reps)]  # fmt: skip
    if ranks > 1:
        command = [find_mpiexec(), "-n", str(ranks), *command]
    print(f"running {ranks} rank(s)...", file=sys.stderr)
    out = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def render(one: dict, two: dict, args) -> str:
    import mpi4py

    import netbrew

    speedup = two["throughput"]["images_per_s"] / one["throughput"]["images_per_s"]
    lines = [
        "# Data-parallel training on MPI",
        "",
        f"Generated by `python benchmarks/distributed.py` on {datetime.date.today()}, "
        f"{platform.machine()} with {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"mpi4py {mpi4py.__version__}, netbrew {netbrew.__version__}; one BLAS thread per rank.",
        "",
        f"Training throughput of the demo CNN, batch {args.batch} per rank, "
        f"{args.steps} steps after 5 warm-up steps:",
        "",
        "| ranks | images/s | speed-up |",
        "|---|---|---|",
        f"| 1 | {one['throughput']['images_per_s']:.0f} | 1.00 |",
        f"| 2 | {two['throughput']['images_per_s']:.0f} | {speedup:.2f} |",
        "",
        f"Allreduce of float32 buffers on 2 ranks, medians of {args.reps}:",
        "",
        "netbrew's op reduces in place (as allreduce_gradients' ops do); mpi4py's Allreduce",
        "is timed out of place (a receive buffer) and in place (MPI.IN_PLACE).",
        "",
        "| buffer | netbrew Allreduce op ms | mpi4py Allreduce ms | netbrew / mpi4py | "
        "mpi4py in place ms | netbrew / mpi4py in place |",
        "|---|---|---|---|---|---|",
    ]
    for row in two["allreduce"]:
        ratio = row["netbrew_ms"] / row["mpi4py_ms"]
        ratio_in_place = row["netbrew_ms"] / row["mpi4py_in_place_ms"]
        lines.append(f"| {row['mb']} MB | {row['netbrew_ms']:.2f} | {row['mpi4py_ms']:.2f} | "
                     f"{ratio:.2f} | {row['mpi4py_in_place_ms']:.2f} | "
                     f"{ratio_in_place:.2f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    began = time.perf_counter()
    one, two = run_job(1, args), run_job(2, args)
    table = render(one, two, args)
    print(table)
    (HERE / "DISTRIBUTED.md").write_text(table)
    print(f"wrote {HERE / 'DISTRIBUTED.md'} in {time.perf_counter() - began:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
