"""A dependency-free progress bar for long work (training, benchmarks, conformance runs)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Prints `label [#####.....] 12/40 loss 0.1234 3.2s` in place on a terminal, and a
    line every `every` steps otherwise (so logs stay readable).

    Args:
        total: steps in all.
        label: text before the bar.
        stream: where to write (stderr by default).
    """

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.label = label
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.every = max(1, self.total // 10)

    def update(self, step: int, **metrics: float) -> None:
        if not self.tty and step % self.every and step != self.total:
            return
        filled = int(30 * step / self.total)
        shown = " ".join(f"{k} {v:.4f}" for k, v in metrics.items())
        line = (
            f"{self.label} [{'#' * filled}{'.' * (30 - filled)}] {step}/{self.total} "
            f"{shown} {time.perf_counter() - self.start:.1f}s"
        )
        self.stream.write(("\r" + line) if self.tty else line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
