"""Per-op timing of net runs: `Workspace.run_net(name, profile=True)` returns a Profile.

Each op's `run` is timed with `time.perf_counter` (a GPU op's until its device is
synchronized) and recorded (op, device, thread, start,
duration, output bytes). The Profile sums them per op type (`table`), per op (`op_table`:
the slowest ops by name), and writes them as a Chrome trace (`save_trace`: open it in
chrome://tracing or https://ui.perfetto.dev; the dag runtime's worker threads are rows of
their own). For the ops whose cost is mostly multiply-adds (Conv, Gemm, MatMul, FC and
their fused forms) the FLOPs are computed from the blob shapes, so the tables also give
GFLOP/s.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from netbrew.executor.compiled import CompiledOp


@dataclass
class ProfileRow:
    """One op type's totals."""

    op_type: str
    calls: int
    total_ms: float
    share: float  # percent of the profiled time
    flops: float  # summed over calls; 0 when not counted
    gflops_per_s: float | None  # None for op types whose FLOPs are not counted


@dataclass(frozen=True)
class OpRecord:
    """One timed run of one op."""

    index: int  # the op's position in its net
    op_type: str
    name: str  # the op's name, else its first output
    device: str
    start: float  # seconds since the Profile was made
    seconds: float
    thread: str  # the name of the thread that ran it
    outputs: tuple[tuple[str, tuple[int, ...], str], ...]  # (blob, shape, dtype) per array
    output_bytes: int
    flops: float | None


@dataclass
class OpRow:
    """One op's totals over the profiled runs."""

    index: int
    op_type: str
    name: str
    device: str
    calls: int
    total_ms: float
    mean_ms: float
    share: float  # percent of the profiled time
    output_bytes: int  # of its last run
    gflops_per_s: float | None


def _shape(blobs: Mapping[str, Any], name: str) -> tuple[int, ...] | None:
    value = blobs.get(name) if name else None
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else None


def op_flops(
    op: CompiledOp, blobs: MutableMapping[str, Any], inputs: Mapping[str, Any] | None = None
) -> float | None:
    """Multiply-add FLOPs (2 per MAC) of one run of `op`, from the shapes in `blobs`;
    None for op types not counted or when a shape is missing. The fused and Winograd forms
    (ConvRelu, ConvWinograd, ConvShuffle, GemmRelu, MatMulBias, ...) count as their base
    op: for Winograd, the direct conv's FLOPs, so GFLOP/s compares with it."""
    kind = op.op.type.removesuffix("Shuffle").removesuffix("Relu").removesuffix("Winograd")
    kind = kind.removesuffix("Bias")
    if kind not in ("Conv", "Gemm", "MatMul", "FC"):
        return None
    source = blobs if inputs is None else inputs  # the inputs as they were before the run
    a = _shape(source, op.inputs[0]) if op.inputs else None
    w = _shape(source, op.inputs[1]) if len(op.inputs) > 1 else None
    y = _shape(blobs, op.outputs[0]) if op.outputs else None
    if a is None or w is None or y is None:
        return None
    if kind == "Conv":
        # 2 * N * M * prod(output spatial) * C/group * prod(kernel)
        if len(y) < 2 or len(w) < 2:
            return None
        n, m = y[0], y[1]
        c_per_group = w[1]  # W is (M, C/group, k...)
        return 2.0 * n * m * math.prod(y[2:]) * c_per_group * math.prod(w[2:])
    # MatMul / Gemm / FC: 2 * M * N * K, K the reduced size; batched MatMul counts batches
    if kind == "MatMul":
        k = a[-1] if a else 1
    elif kind == "Gemm":
        k = a[0] if op.attrs.get("transA") and len(a) == 2 else a[-1]
    else:  # FC: X flattened at `axis` to (M, K)
        axis = op.attrs.get("axis", 1)
        k = math.prod(a[axis:]) if a else 1
    return 2.0 * math.prod(y) * k


@dataclass
class _Totals:
    """One op's running totals."""

    index: int
    op_type: str
    name: str
    device: str
    calls: int = 0
    seconds: float = 0.0
    flops: float | None = None  # None while none of its runs had countable FLOPs
    output_bytes: int = 0  # of its last run

    @property
    def rate(self) -> float | None:
        """GFLOP/s, where the FLOPs are counted."""
        if self.flops is None or self.seconds <= 0:
            return None
        return self.flops / self.seconds / 1e9


class Profile:
    """Op timings gathered over one or more runs; thread-safe (the dag runtime times
    ops from several threads).

    Totals are kept per op for every run. The individual runs (`records`, for the trace)
    are kept up to `max_records`; later ones are counted in `dropped` only, so a long
    profile holds bounded memory.
    """

    def __init__(self, max_records: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._began = time.perf_counter()
        self._ops: dict[tuple[int, str, str], _Totals] = {}
        self.records: list[OpRecord] = []
        self.max_records = max_records
        self.dropped = 0
        self.iterations = 0

    def time(self, op: CompiledOp, blobs: MutableMapping[str, Any]) -> None:
        """Runs `op` against `blobs` and records its time (and FLOPs)."""
        before = {n: blobs.get(n) for n in op.inputs[:2] if n}  # an op may write its input
        start = time.perf_counter()
        op.run(blobs)
        if op.device_id is not None:  # a GPU op's kernels run after launch returns
            from netbrew.cuda import synchronize

            synchronize(op.device_id)
        elapsed = time.perf_counter() - start
        arrays = [
            (name, value)
            for name in op.outputs
            if name and isinstance(value := blobs.get(name), np.ndarray)
        ]
        record = OpRecord(
            op.index,
            op.op.type,
            op.op.name or (op.outputs[0] if op.outputs else ""),
            op.device,
            start - self._began,
            elapsed,
            threading.current_thread().name,
            tuple((name, value.shape, str(value.dtype)) for name, value in arrays),
            sum(value.nbytes for _, value in arrays),
            op_flops(op, blobs, before),
        )
        key = (record.index, record.op_type, record.name)
        with self._lock:
            totals = self._ops.get(key)
            if totals is None:
                totals = self._ops[key] = _Totals(*key, record.device)
            totals.calls += 1
            totals.seconds += elapsed
            if record.flops is not None:
                totals.flops = (totals.flops or 0.0) + record.flops
            totals.output_bytes = record.output_bytes
            if len(self.records) < self.max_records:
                self.records.append(record)
            else:
                self.dropped += 1

    @property
    def total_ms(self) -> float:
        return 1e3 * sum(t.seconds for t in self._ops.values())

    def rows(self) -> list[ProfileRow]:
        """One row per op type, slowest first."""
        by_type: dict[str, _Totals] = {}
        for t in self._ops.values():
            kind = by_type.setdefault(t.op_type, _Totals(-1, t.op_type, "", ""))
            kind.calls += t.calls
            kind.seconds += t.seconds
            if t.flops is not None:
                kind.flops = (kind.flops or 0.0) + t.flops
        total = sum(t.seconds for t in by_type.values()) or 1.0
        rows = [
            ProfileRow(
                t.op_type,
                t.calls,
                1e3 * t.seconds,
                100.0 * t.seconds / total,
                t.flops or 0.0,
                t.rate,
            )
            for t in by_type.values()
        ]
        return sorted(rows, key=lambda r: r.total_ms, reverse=True)

    def table(self) -> str:
        """The rows as a text table, with a total line."""
        lines = [f"{'op type':<24}{'calls':>8}{'total ms':>12}{'share':>9}{'GFLOP/s':>10}"]
        for r in self.rows():
            rate = f"{r.gflops_per_s:.2f}" if r.gflops_per_s is not None else "-"
            lines.append(
                f"{r.op_type:<24}{r.calls:>8}{r.total_ms:>12.3f}{r.share:>8.1f}%{rate:>10}"
            )
        per_iter = self.total_ms / self.iterations if self.iterations else self.total_ms
        lines.append(
            f"{'total':<24}{sum(r.calls for r in self.rows()):>8}{self.total_ms:>12.3f}"
            f"{100.0:>8.1f}%   ({per_iter:.3f} ms per run over {self.iterations} runs)"
        )
        return "\n".join(lines)

    def op_rows(self) -> list[OpRow]:
        """One row per op (by its index in the net), slowest first."""
        total = sum(t.seconds for t in self._ops.values()) or 1.0
        rows = [
            OpRow(
                t.index,
                t.op_type,
                t.name,
                t.device,
                t.calls,
                1e3 * t.seconds,
                1e3 * t.seconds / t.calls,
                100.0 * t.seconds / total,
                t.output_bytes,
                t.rate,
            )
            for t in self._ops.values()
        ]
        return sorted(rows, key=lambda r: r.total_ms, reverse=True)

    def op_table(self, top: int | None = 10) -> str:
        """The `top` slowest ops (all with None) as a text table: index, type, name, device,
        mean ms per run, share, output size and GFLOP/s."""
        rows = self.op_rows()
        shown = rows if top is None else rows[:top]
        lines = [
            f"{'op':>6}  {'type':<20}{'name':<28}{'device':<8}{'mean ms':>10}{'share':>8}"
            f"{'out KiB':>10}{'GFLOP/s':>10}"
        ]
        for r in shown:
            rate = f"{r.gflops_per_s:.2f}" if r.gflops_per_s is not None else "-"
            name = r.name if len(r.name) <= 26 else r.name[:12] + ".." + r.name[-12:]
            lines.append(
                f"{'#' + str(r.index):>6}  {r.op_type:<20}{name:<28}{r.device:<8}"
                f"{r.mean_ms:>10.3f}{r.share:>7.1f}%{r.output_bytes / 1024:>10.1f}{rate:>10}"
            )
        if len(shown) < len(rows):
            lines.append(f"({len(rows) - len(shown)} faster ops not shown)")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The records as a Chrome trace (the Trace Event Format's JSON object form): one
        complete event per kept op run, on a row per thread, with the op's index, device and
        outputs (shape, dtype) as its args; `otherData` says how many runs were dropped."""
        pid = os.getpid()
        threads = {name: i for i, name in enumerate(dict.fromkeys(r.thread for r in self.records))}
        events: list[dict[str, Any]] = [
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
            for name, tid in threads.items()
        ]
        for r in self.records:
            events.append(
                {
                    "name": f"{r.op_type} {r.name}".strip(),
                    "cat": r.op_type,
                    "ph": "X",
                    "ts": r.start * 1e6,
                    "dur": r.seconds * 1e6,
                    "pid": pid,
                    "tid": threads[r.thread],
                    "args": {
                        "op": r.index,
                        "device": r.device,
                        "outputs": {n: f"{dtype}{list(shape)}" for n, shape, dtype in r.outputs},
                        "output_bytes": r.output_bytes,
                    },
                }
            )
        trace: dict[str, Any] = {"traceEvents": events, "displayTimeUnit": "ms"}
        if self.dropped:
            trace["otherData"] = {
                "note": f"the first {len(self.records)} op runs; {self.dropped} later ones "
                f"were not kept (Profile max_records={self.max_records})"
            }
        return trace

    def save_trace(self, path: str | os.PathLike) -> Path:
        """Writes `chrome_trace()` as JSON to `path`; returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.chrome_trace()))
        return path

    def __str__(self) -> str:
        return self.table()
