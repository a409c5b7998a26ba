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


def batchnorm_checkpoint(out: Path) -> None:
    """Each rank's BatchNorm sees its own data; the checkpoint holds the ranks' average
    running statistics (saved per rank first, for the test to compare)."""
    from netbrew import brew
    from netbrew.brew import ModelHelper

    world = distributed.init(timeout=60)
    model = ModelHelper("bn", seed=0)
    bn = brew.spatial_bn(model, "x", "bn", 3, epsilon=1e-5, momentum=0.5)
    loss = model.net.AveragedLoss(model.net.ReduceMean(bn, "m", keepdims=0), "loss")
    model.add_gradient_operators([loss])
    distributed.allreduce_gradients(model)
    brew.optimizer.build_sgd(model, 0.1)
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    x = np.random.default_rng(world.rank).normal(world.rank, 1, (4, 3, 2, 2))
    ws.feed_blob("x", x.astype(np.float32))
    ws.create_net(model.net)
    ws.run_net(model.net.name, num_iter=3)
    stats = {str(b): ws.fetch_blob(str(b)) for b in model.get_computed_params()}
    np.savez(out / f"stats_rank{world.rank}.npz", **stats)
    distributed.save_checkpoint(out / "checkpoint.pb", ws, model)


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
    elif mode == "batchnorm":
        batchnorm_checkpoint(out)
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
