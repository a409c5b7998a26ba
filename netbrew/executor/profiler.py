"""Per-op timing of net runs: `Workspace.run_net(name, profile=True)` returns a Profile.

Each op's `run` is timed with `time.perf_counter`; times are summed per op type. For the
ops whose cost is mostly multiply-adds (Conv, Gemm, MatMul, FC and their fused forms) the
FLOPs are computed from the blob shapes, so the table also gives GFLOP/s.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

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


def _shape(blobs: MutableMapping[str, Any], name: str) -> tuple[int, ...] | None:
    value = blobs.get(name) if name else None
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else None


def op_flops(op: CompiledOp, blobs: MutableMapping[str, Any]) -> float | None:
    """Multiply-add FLOPs (2 per MAC) of one run of `op`, from the shapes in `blobs`;
    None for op types not counted or when a shape is missing. The fused and Winograd forms
    (ConvRelu, ConvWinograd, GemmRelu, ...) count as their base op: for Winograd, the
    direct conv's FLOPs, so GFLOP/s compares with it."""
    kind = op.op.type.removesuffix("Relu").removesuffix("Winograd")
    if kind not in ("Conv", "Gemm", "MatMul", "FC"):
        return None
    a = _shape(blobs, op.inputs[0]) if op.inputs else None
    w = _shape(blobs, op.inputs[1]) if len(op.inputs) > 1 else None
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


class Profile:
    """Op timings gathered over one or more runs; thread-safe (the dag runtime times
    ops from several threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._seconds: dict[str, float] = {}
        self._flops: dict[str, float] = {}
        self.iterations = 0

    def time(self, op: CompiledOp, blobs: MutableMapping[str, Any]) -> None:
        """Runs `op` against `blobs` and records its time (and FLOPs)."""
        start = time.perf_counter()
        op.run(blobs)
        elapsed = time.perf_counter() - start
        flops = op_flops(op, blobs)
        kind = op.op.type
        with self._lock:
            self._calls[kind] = self._calls.get(kind, 0) + 1
            self._seconds[kind] = self._seconds.get(kind, 0.0) + elapsed
            if flops is not None:
                self._flops[kind] = self._flops.get(kind, 0.0) + flops

    @property
    def total_ms(self) -> float:
        return 1e3 * sum(self._seconds.values())

    def rows(self) -> list[ProfileRow]:
        """One row per op type, slowest first."""
        total = sum(self._seconds.values()) or 1.0
        rows = []
        for kind, seconds in self._seconds.items():
            flops = self._flops.get(kind)
            rate = flops / seconds / 1e9 if flops is not None and seconds > 0 else None
            rows.append(
                ProfileRow(
                    kind,
                    self._calls[kind],
                    1e3 * seconds,
                    100.0 * seconds / total,
                    flops or 0.0,
                    rate,
                )
            )
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

    def __str__(self) -> str:
        return self.table()
