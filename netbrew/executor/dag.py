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
import statistics
import threading
import time
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from netbrew.executor.compiled import CompiledOp
from netbrew.netdef.args import args_dict
from netbrew.proto.netbrew_pb2 import NetDef

DEFAULT_WORKERS = 2
TUNING_RUNS = 3
"""Timed runs per mode (after one warm-up each) before an adaptive DagNet picks a mode."""


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

    The calling thread is one of the workers (so 2 workers = the caller + 1 pool thread),
    and every worker takes the next ready task itself: no coordinator thread sits between
    a finished task and its children. Gives the same results as `simple`. When an op
    fails, no new op starts, the ops already running finish, and the op's OperatorError
    is raised as it was.

    Adaptive (the net's "adaptive" argument, default 1): handing small ops between
    threads costs more than it saves on nets of many short ops (squeezenet, shufflenet),
    so the first runs alternate between parallel and in-order execution, TUNING_RUNS
    timed runs of each after a warm-up, and the runtime keeps the mode with the faster
    median (`mode`). adaptive=0 always runs in parallel.
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
        self.adaptive = bool(args_dict(net.arg).get("adaptive", 1))
        self._mode: str | None = None
        self._samples: dict[str, list[float]] = {"parallel": [], "in_order": []}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.net.name

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The helper threads (num_workers - 1), started on first use and kept."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=max(self.num_workers - 1, 1),
                    thread_name_prefix=f"netbrew-dag-{self.name}",
                )
            return self._pool

    def run(self, blobs: MutableMapping[str, Any], profile: Any = None) -> None:
        if not self.tasks:
            return
        mode = self.mode
        if mode is not None:
            self._run(mode, blobs, profile)
            return
        with self._pool_lock:  # still measuring: alternate the modes, warm-up first
            mode = min(self._samples, key=lambda m: len(self._samples[m]))
        start = time.perf_counter()
        self._run(mode, blobs, profile)
        self._record(mode, time.perf_counter() - start)

    @property
    def mode(self) -> str | None:
        """ "parallel", "in_order", or None while the first runs are still measured."""
        if not self.adaptive or self.num_workers == 1:
            return "parallel" if self.num_workers > 1 else "in_order"
        return self._mode

    def _record(self, mode: str, seconds: float) -> None:
        with self._pool_lock:
            self._samples[mode].append(seconds)
            counts = [len(v) for v in self._samples.values()]
            if self._mode is None and min(counts) > TUNING_RUNS:
                # the first run of each mode is a warm-up; the faster median wins
                medians = {m: statistics.median(v[1:]) for m, v in self._samples.items()}
                self._mode = min(medians, key=medians.__getitem__)

    def _run(self, mode: str, blobs: MutableMapping[str, Any], profile: Any) -> None:
        if mode == "in_order":
            for op in self.ops:
                if profile is None:
                    op.run(blobs)
                else:
                    profile.time(op, blobs)
            return
        state = _Run(self, blobs, profile)
        helpers = min(self.num_workers, len(self.tasks)) - 1
        futures = [self.pool.submit(state.work) for _ in range(helpers)]
        state.work()
        for future in futures:
            future.result()
        if state.error is not None:
            raise state.error

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


class _Run:
    """One run of a DagNet: the ready tasks (earliest op first), the count of unfinished
    dependencies per task, and the first error. Workers share it under one condition."""

    def __init__(self, dag: DagNet, blobs: MutableMapping[str, Any], profile: Any) -> None:
        self.dag, self.blobs, self.profile = dag, blobs, profile
        self.waiting = [len(d) for d in dag.task_deps]
        self.ready = [t for t, count in enumerate(self.waiting) if count == 0]
        heapq.heapify(self.ready)
        self.left = len(dag.tasks)
        self.error: BaseException | None = None
        self.cond = threading.Condition()

    def work(self) -> None:
        """Takes ready tasks until the run is done or has failed."""
        while True:
            with self.cond:
                while not self.ready and self.left and self.error is None:
                    self.cond.wait()
                if not self.ready or self.error is not None:
                    return
                task = heapq.heappop(self.ready)
            try:
                self._run_ops(self.dag.tasks[task])
            except BaseException as e:
                with self.cond:
                    if self.error is None:
                        self.error = e
                    self.cond.notify_all()
                return
            with self.cond:
                self.left -= 1
                for child in self.dag.task_children[task]:
                    self.waiting[child] -= 1
                    if self.waiting[child] == 0:
                        heapq.heappush(self.ready, child)
                if self.ready or not self.left:
                    self.cond.notify_all()

    def _run_ops(self, task: list[int]) -> None:
        for i in task:
            if self.error is not None:  # another worker failed: start no more ops
                return
            op = self.dag.ops[i]
            if self.profile is None:
                op.run(self.blobs)
            else:
                self.profile.time(op, self.blobs)
