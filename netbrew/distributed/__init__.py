"""Data-parallel training on MPI (mpi4py), as Caffe2 trained with collective ops.

    from netbrew import distributed

    world = distributed.init()          # COMM_WORLD under `netbrew launch`, else a world of 1
    x, y = distributed.shard((x, y))    # this rank's part of the data
    ... build the model, model.add_gradient_operators([loss]) ...
    distributed.allreduce_gradients(model)     # Allreduce ops on the gradients, bucketed
    brew.optimizer.build_sgd(model, 0.1, momentum=0.9)
    distributed.broadcast_parameters(model)    # every rank starts from rank 0's values

The collectives are ops (Allreduce, Broadcast, Allgather), so a data-parallel training
net is still one NetDef: it prints, profiles and runs under `dag`. Run the script with
`netbrew launch -n 2 script.py`. A rank that raises ends the job; a collective that
waits longer than the timeout raises CollectiveTimeout; ranks that built different nets
fail at their first collective, naming the blob.
"""

from netbrew.distributed.data_parallel import (
    allreduce_gradients,
    broadcast_parameters,
    load_checkpoint,
    save_checkpoint,
    shard,
)
from netbrew.distributed.world import (
    CollectiveError,
    CollectiveTimeout,
    World,
    current,
    init,
)


def rank() -> int:
    """This process's rank (0 in a world of one)."""
    return init().rank


def world_size() -> int:
    """How many ranks the job has."""
    return init().size


def barrier() -> None:
    """Waits until every rank gets here (bounded by the world's timeout)."""
    w = init()
    if w.size > 1:
        from netbrew.distributed.world import wait

        with w.lock:
            wait(w.comm.Ibarrier(), "barrier")


__all__ = [
    "CollectiveError",
    "CollectiveTimeout",
    "World",
    "allreduce_gradients",
    "barrier",
    "broadcast_parameters",
    "current",
    "init",
    "load_checkpoint",
    "rank",
    "save_checkpoint",
    "shard",
    "world_size",
]
