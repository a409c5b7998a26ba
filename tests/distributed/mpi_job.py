"""Jobs the distributed tests run on 2 ranks under mpiexec (and on 1 rank, in-process).

python mpi_job.py MODE OUT_DIR
"""

import sys
import time
from pathlib import Path

import numpy as np

from netbrew import distributed
from netbrew.demo import split, training_model
from netbrew.executor import Workspace
from netbrew.netdef import op_def

STEPS, BATCH = 20, 64


def train_demo_cnn(steps: int, dag: bool = False, stop_after: int | None = None, resume=None):
    """The demo's CNN (momentum, weight decay) for `steps` SGD steps on the same 64-image
    batches, each rank taking its contiguous part of every batch."""
    world = distributed.init(timeout=60)
    model = training_model()
    distributed.allreduce_gradients(model)
    distributed.broadcast_parameters(model)
    if dag:
        model.net.set_type("dag", num_workers=2)
    x, y, _, _ = split()
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    if resume is not None:
        distributed.load_checkpoint(resume, ws)
    part = BATCH // world.size
    ws.feed_blob("data", x[:part])
    ws.feed_blob("label", y[:part])
    ws.create_net(model.net)
    first = int(ws.fetch_blob("optimizer_iteration")[0])
    for step in range(first, steps):
        rows = slice(step * BATCH + world.rank * part, step * BATCH + (world.rank + 1) * part)
        ws.feed_blob("data", x[rows])
        ws.feed_blob("label", y[rows])
        ws.run_net(model.net.name)
        if stop_after is not None and step + 1 == stop_after:
            break
    return world, model, ws


def save_params(out: Path, world, model, ws) -> None:
    params = {str(p): ws.fetch_blob(str(p)) for p in model.get_checkpoint_blobs()}
    np.savez(out / f"params_rank{world.rank}_of{world.size}.npz", **params)


def main(mode: str, out: Path) -> None:
    if mode in ("exact", "dag"):
        save_params(out, *train_demo_cnn(STEPS, dag=mode == "dag"))
    elif mode == "checkpoint":
        world, model, ws = train_demo_cnn(STEPS, stop_after=7)
        distributed.save_checkpoint(out / "checkpoint.pb", ws, model)
        save_params(out, *train_demo_cnn(STEPS, resume=out / "checkpoint.pb"))
    elif mode == "raise":
        world = distributed.init(timeout=60)
        if world.rank == 1:
            raise ValueError("rank 1 fails on purpose")
        distributed.barrier()  # rank 0 would wait here for ever without the abort
    elif mode == "mismatch":
        world = distributed.init(timeout=60)
        ws = Workspace()
        ws.feed_blob("grad_w", np.ones(3 + world.rank, np.float32))  # rank 1's is longer
        ws.run_operator_once(op_def("Allreduce", ["grad_w"], ["grad_w"]))
    elif mode == "timeout":
        world = distributed.init(timeout=2)
        if world.rank == 1:
            time.sleep(25)
        distributed.barrier()
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
