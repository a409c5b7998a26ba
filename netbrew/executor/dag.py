"""The `dag` runtime (alias `parallel`): runs independent ops of a net on a thread pool.

Dependencies come from blob hazards, taken by blob name in op order:
- read after write: an op depends on the last earlier op that wrote each of its inputs;
- write after read: an op that writes a blob depends on every op that read it since the
  last write (an in-place op reads and writes the same blob, so both apply);
- write after write: an op that writes a blob depends on its last earlier writer;
plus `control_input`: an op depends on the last earlier writer of each blob named there.

Ops that see the whole workspace (control flow: `wants_scope`) or touch files by name
(`wants_names`) are barriers: they wait for every earlier op, and every later op waits
for them. Linear runs of ops are chained into one task to cut scheduling overhead.
NumPy releases the GIL in BLAS calls and large ufuncs, so the threads overlap there.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import MutableMapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from netbrew.executor.compiled import CompiledOp
from netbrew.netdef.args import args_dict
from netbrew.proto.netbrew_pb2 import NetDef

DEFAULT_WORKERS = 2


def num_workers(net: NetDef) -> int:
    """The worker count: the net's "num_workers" argument, else NetDef.num_workers, else 2."""
    value = args_dict(net.arg).get("num_workers")
    if value is None and net.HasField("num_workers"):
        value = net.num_workers
    if value is None:
        return DEFAULT_WORKERS
    count = int(value)
    if count < 1:
        raise ValueError(f"net {net.name!r}: num_workers must be at least 1, got {count}")
    return count


def op_dependencies(ops: list[CompiledOp]) -> list[set[int]]:
    """For each op, the indices (into `ops`) of the earlier ops it must wait for."""
    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    barrier: int | None = None
    deps: list[set[int]] = []
    for i, op in enumerate(ops):
        mine: set[int] = set()
        if op.schema.wants_scope or op.schema.wants_names:
            mine.update(range(i))
            barrier = i
            deps.append(mine)
            continue
        if barrier is not None:
            mine.add(barrier)
        reads = [n for n in op.inputs if n] + list(op.op.control_input)
        for name in reads:
            if name in last_writer:
                mine.add(last_writer[name])
        for name in op.outputs:
            if not name:
                continue
            if name in last_writer:
                mine.add(last_writer[name])
            mine.update(readers.get(name, ()))
        for name in op.inputs:
            if name:
                readers.setdefault(name, []).append(i)
        for name in op.outputs:
            if name:
                last_writer[name] = i
                readers[name] = []
        mine.discard(i)
        deps.append(mine)
    return deps


def chain_tasks(deps: list[set[int]]) -> list[list[int]]:
    """Groups ops into tasks: an op joins the chain of its only dependency when it is
    that op's only dependent. Returns the tasks, each a list of op indices in order."""
    dependents: list[list[int]] = [[] for _ in deps]
    for i, mine in enumerate(deps):
        for d in mine:
            dependents[d].append(i)
    task_of: list[int] = [0] * len(deps)
    tasks: list[list[int]] = []
    for i, mine in enumerate(deps):
        if len(mine) == 1:
            (d,) = mine
            if len(dependents[d]) == 1 and tasks[task_of[d]][-1] == d:
                task_of[i] = task_of[d]
                tasks[task_of[d]].append(i)
                continue
        task_of[i] = len(tasks)
        tasks.append([i])
    return tasks


class DagNet:
    """Runs a created net's ops on `num_workers` threads, in dependency order.

    Gives the same results as `simple`. When an op fails, no new task starts, the tasks
    already running finish, and the op's OperatorError is raised as it was.
    """

    def __init__(self, net: NetDef, ops: list[CompiledOp]) -> None:
        self.net = net
        self.ops = ops
        self.num_workers = num_workers(net)
        deps = op_dependencies(ops)
        self.tasks = chain_tasks(deps)
        task_of = {op: t for t, task in enumerate(self.tasks) for op in task}
        self.task_deps: list[set[int]] = [
            {task_of[d] for d in deps[task[0]]} - {t} for t, task in enumerate(self.tasks)
        ]
        self.task_children: list[list[int]] = [[] for _ in self.tasks]
        for t, mine in enumerate(self.task_deps):
            for d in mine:
                self.task_children[d].append(t)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.net.name

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The worker pool, started on first use and kept for the runtime's life."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.num_workers, thread_name_prefix=f"netbrew-dag-{self.name}"
                )
            return self._pool

    def _run_task(
        self,
        task: list[int],
        blobs: MutableMapping[str, Any],
        profile: Any,
        stop: threading.Event,
    ) -> None:
        for i in task:
            if stop.is_set():  # another task failed: start no more ops
                return
            op = self.ops[i]
            if profile is None:
                op.run(blobs)
            else:
                profile.time(op, blobs)

    def run(self, blobs: MutableMapping[str, Any], profile: Any = None) -> None:
        if not self.tasks:
            return
        pool = self.pool
        stop = threading.Event()
        waiting = [len(d) for d in self.task_deps]
        # ready tasks wait here, earliest op first, so that at most num_workers are in
        # flight: after a failure nothing queued in the pool is left to start
        ready = [t for t, count in enumerate(waiting) if count == 0]
        heapq.heapify(ready)
        running: dict[Future, int] = {}
        error: BaseException | None = None
        while ready or running:
            while ready and len(running) < self.num_workers and error is None:
                t = heapq.heappop(ready)
                running[pool.submit(self._run_task, self.tasks[t], blobs, profile, stop)] = t
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                t = running.pop(future)
                failure = future.exception()
                if failure is not None and error is None:
                    error = failure
                    stop.set()
                if error is not None:
                    continue
                for child in self.task_children[t]:
                    waiting[child] -= 1
                    if waiting[child] == 0:
                        heapq.heappush(ready, child)
        if error is not None:
            raise error

    def close(self) -> None:
        """Stops the worker threads (they also stop when the runtime is collected)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
