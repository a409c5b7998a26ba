"""The MPI world netbrew's collectives run in: ranks, timeouts, fingerprints, fault exits.

mpi4py is imported only when a world of more than one rank is asked for; without a
launcher (or without mpi4py) the world is one rank and every collective is a local copy.
Collectives are non-blocking MPI calls polled against a deadline (`timeout`, default
NETBREW_COLLECTIVE_TIMEOUT or 600 s), so a rank waiting on a peer that never comes raises
CollectiveTimeout instead of hanging. `init()` also makes an uncaught exception on any
rank print once, with the rank, and abort the whole job (MPI_Abort), so nothing waits on
a rank that died.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import traceback
from typing import Any

import numpy as np

from netbrew.errors import NetbrewError


class CollectiveError(NetbrewError, RuntimeError):
    """A collective could not complete: the ranks disagree on it, or MPI failed."""


class CollectiveTimeout(CollectiveError, TimeoutError):
    """A collective waited longer than the world's timeout for its peers."""


class World:
    """One process's view of the job: its rank, the size, the communicator (or None)."""

    def __init__(self, comm: Any = None, timeout: float = 600.0) -> None:
        self.comm = comm
        self.rank = comm.Get_rank() if comm is not None else 0
        self.size = comm.Get_size() if comm is not None else 1
        self.timeout = timeout
        self.checked: set[tuple] = set()  # collective signatures the ranks agreed on
        self.lock = threading.Lock()  # one collective at a time, in program order

    def __repr__(self) -> str:
        return f"World(rank={self.rank}, size={self.size})"


_world: World | None = None


def launched_size() -> int:
    """The job size a launcher (mpiexec: MPICH's PMI or Open MPI's variables) announced."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def init(timeout: float | None = None) -> World:
    """The world of this process, made on the first call: COMM_WORLD under a launcher,
    else a world of one. `timeout` (seconds) bounds every collective's wait."""
    global _world
    if _world is not None:
        if timeout is not None:
            _world.timeout = timeout
        return _world
    if timeout is None:
        timeout = float(os.environ.get("NETBREW_COLLECTIVE_TIMEOUT", "600"))
    comm = None
    if launched_size() > 1:
        try:
            from mpi4py import MPI
        except ImportError:
            raise CollectiveError(
                "this process was started by an MPI launcher, but mpi4py is missing: "
                'pip install "netbrew[distributed]"'
            ) from None
        comm = MPI.COMM_WORLD
        _install_abort_on_error(comm)
    _world = World(comm, timeout)
    return _world


def current() -> World | None:
    """The world made by init(), or None when distributed training was never started."""
    return _world


def world() -> World:
    return _world if _world is not None else init()


def _install_abort_on_error(comm: Any) -> None:
    """An uncaught exception prints once, tagged with the rank, then aborts the job."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        if issubclass(kind, KeyboardInterrupt):
            previous(kind, value, tb)
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write(f"[rank {comm.Get_rank()}] {text}")
        sys.stderr.flush()
        time.sleep(0.5)  # let mpiexec forward the message before it tears the job down
        comm.Abort(1)

    sys.excepthook = hook
    threading.excepthook = lambda args: hook(args.exc_type, args.exc_value, args.exc_traceback)


def wait(request: Any, what: str) -> None:
    """Polls an MPI request until it completes or the world's timeout passes."""
    deadline = time.monotonic() + world().timeout
    spins = 0
    while not request.Test():
        spins += 1
        if spins % 64 == 0:
            if time.monotonic() > deadline:
                raise CollectiveTimeout(
                    f"{what}: rank {world().rank} waited {world().timeout:g} s for its peers; "
                    "a rank is stuck or gone (set NETBREW_COLLECTIVE_TIMEOUT to wait longer)"
                )
            time.sleep(0)  # let other threads (the dag runtime's) run


def _digest(text: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True
    )


def describe(name: str, array: np.ndarray) -> str:
    return f"{name} {array.dtype}{list(array.shape)}"


def check_agreement(kind: str, names: list[str], arrays: list[np.ndarray]) -> None:
    """Once per signature: the ranks compare a fingerprint of the collective's blob names,
    shapes and dtypes, and on a mismatch every rank raises naming the first blob that
    differs from rank 0's."""
    w = world()
    described = [describe(n, a) for n, a in zip(names, arrays)]
    signature = (kind, *described)
    if w.size == 1 or signature in w.checked:
        return

    mine = np.array([_digest("|".join(signature)), len(described)], np.int64)
    every = np.empty((w.size, 2), np.int64)
    wait(w.comm.Iallgather(mine, every), f"{kind} fingerprint")
    if (every == every[0]).all():
        w.checked.add(signature)
        return
    # They differ: every rank gathers every rank's descriptions (bytes, no pickling), so
    # each can name the first tensor where it and another rank disagree.
    text = np.frombuffer("\n".join(described).encode(), np.uint8)
    lengths = np.empty(w.size, np.int64)
    wait(w.comm.Iallgather(np.array([len(text)], np.int64), lengths), f"{kind} fingerprint")
    gathered = np.empty(int(lengths.sum()), np.uint8)
    counts = [int(n) for n in lengths]
    wait(w.comm.Iallgatherv(text, [gathered, counts]), f"{kind} fingerprint")
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    lists = [gathered[offsets[r] : offsets[r + 1]].tobytes().decode() for r in range(w.size)]
    raise CollectiveError(_mismatch(kind, w.rank, [t.split("\n") if t else [] for t in lists]))


def _mismatch(kind: str, rank: int, every: list[list[str]]) -> str:
    """The first tensor where this rank and another disagree, both sides named."""
    mine = every[rank]
    for other, theirs in enumerate(every):
        for k in range(max(len(mine), len(theirs))):
            a = mine[k] if k < len(mine) else "nothing"
            b = theirs[k] if k < len(theirs) else "nothing"
            if a != b:
                return (
                    f"{kind}: the ranks disagree on tensor #{k}: rank {rank} has {a}, rank "
                    f"{other} has {b}; every rank must build the same net"
                )
    return f"{kind}: the ranks disagree on the collective ({kind} kinds differ)"
