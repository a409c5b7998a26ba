"""Training step time of the demo CNN fed from memory against read from a DB.

From memory, each step's batch is fed with feed_blob (the demo's way); from a DB (minidb
and LMDB, written with netbrew.db.write_tensor_protos), brew.db_input's reader brings the
batch, read ahead on its background thread (prefetch 4). The ratio is DB / memory: 1.0
means prefetch hides the reads entirely.

To show the overlap, two more rows read on the step's own thread (prefetch 0), where a
step costs the training plus the read, and two rows add a simulated disk wait to every
batch read (a sleep of --disk-ms, which like a real disk read leaves the GIL free): with
prefetch the wait happens while the step runs, without it the step waits for it. The
time to read a batch alone, with no training beside it, is reported as well.

The machine is shared, so the runs are interleaved: --rounds rounds each run every row
for --steps steps (after warm-up steps) with a fresh reader, in alternating order;
medians and minima pool all rounds, and the per-round ratios give the spread.

    python benchmarks/db_input.py [--rounds 30] [--steps 20] [--batch 64] [--disk-ms 2]

Writes benchmarks/DB_INPUT.md (or --out), keeping the notes after its NOTES line.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import tempfile
import time
from functools import wraps
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WARMUP = 10  # steps before timing, on a row's first block
REWARM = 3  # on its later blocks: the net is warm, the reader new
NOTES = "<!-- notes below are written by hand and kept when the tables are regenerated -->"


def lenet_training(data_from_db: str | None, batch: int, db: str | None = None, prefetch=4):
    """The demo's training model; with a DB type, fed by brew.db_input instead."""
    from netbrew import brew
    from netbrew.brew import ModelHelper
    from netbrew.demo import lenet

    model = ModelHelper(name=f"lenet_{data_from_db or 'memory'}", seed=0)
    if data_from_db:
        brew.db_input(
            model, ["data", "label"], batch_size=batch, db=db, db_type=data_from_db,
            prefetch=prefetch,
        )  # fmt: skip
    softmax = brew.softmax(model, lenet(model), "softmax")
    loss = model.net.AveragedLoss(model.net.LabelCrossEntropy([softmax, "label"], "xent"), "loss")
    model.add_gradient_operators([loss])
    brew.optimizer.build_sgd(model, 0.05, momentum=0.9, weight_decay=1e-4)
    return model


def db_path(kind: str, folder: Path) -> str:
    """The demo's training digits as a `kind` DB in `folder`, written on first use."""
    from netbrew.db import write_tensor_protos
    from netbrew.demo import split

    path = folder / f"train_{kind}"
    if not path.exists():
        x, y, _, _ = split()
        write_tensor_protos(str(path), x, y.astype(np.int32), db_type=kind)
    return str(path)


def _with_disk_wait(reader, disk_ms: float) -> None:
    """Every batch `reader` reads first waits disk_ms, without the GIL (time.sleep)."""
    read_batch = reader.read_batch

    @wraps(read_batch)
    def slow_read_batch(*args, **kwargs):
        time.sleep(disk_ms / 1e3)
        return read_batch(*args, **kwargs)

    reader.read_batch = slow_read_batch


class Row:
    """The demo's training step fed one way: from memory (kind "memory"), or from a
    `kind` DB with `prefetch` batches read ahead and `disk_ms` of simulated disk wait per
    batch. The model is built once; run() times a block of steps."""

    def __init__(
        self, kind: str, batch: int, folder: Path, *, prefetch: int = 4, disk_ms: float = 0.0
    ) -> None:
        from netbrew.demo import split
        from netbrew.executor import Workspace

        self.x, self.y, _, _ = split()
        self.kind, self.batch, self.disk_ms = kind, batch, disk_ms
        self.from_db = kind != "memory"
        db = db_path(kind, folder) if self.from_db else None
        self.model = lenet_training(kind if self.from_db else None, batch, db, prefetch)
        self.ws = Workspace()
        self.ws.run_net_once(self.model.param_init_net)
        self.reader_blob = f"dbreader_{db}"
        if self.from_db:  # each block opens its own (an lmdb opens once per process)
            self.ws.fetch_blob(self.reader_blob).item().close()
        else:
            self.ws.feed_blob("data", self.x[:batch])
            self.ws.feed_blob("label", self.y[:batch])
        self.ws.create_net(self.model.net)
        self.rng = np.random.default_rng(0)
        self.warmup = WARMUP

    def _fresh_reader(self) -> None:
        """A new reader, its queue empty: no batches read ahead while other rows ran."""
        (create_db,) = [op for op in self.model.param_init_net.proto().op if op.type == "CreateDB"]
        self.ws.run_operator_once(create_db)
        if self.disk_ms:
            _with_disk_wait(self.ws.fetch_blob(self.reader_blob).item(), self.disk_ms)

    def run(self, steps: int) -> list[float]:
        """Seconds per step of `steps` steps, after warm-up steps (WARMUP on the first
        block, REWARM later); a DB's reader is new for the block and closed after it."""
        if self.from_db:
            self._fresh_reader()
        x, y, batch, ws = self.x, self.y, self.batch, self.ws
        times = []
        try:
            warmup, self.warmup = self.warmup, REWARM
            for step in range(steps + warmup):
                start = time.perf_counter()
                if not self.from_db:  # the batch costs what feeding it costs
                    pick = self.rng.choice(len(y), batch, replace=False)
                    ws.feed_blob("data", x[pick])
                    ws.feed_blob("label", y[pick])
                ws.run_net(self.model.net.name)
                if step >= warmup:
                    times.append(time.perf_counter() - start)
        finally:
            if self.from_db:
                ws.fetch_blob(self.reader_blob).item().close()
        return times


def step_times(
    kind: str, steps: int, batch: int, folder: Path, *, prefetch: int = 4, disk_ms: float = 0.0
) -> list[float]:
    """Seconds per training step of one Row, `steps` of them after WARMUP."""
    return Row(kind, batch, folder, prefetch=prefetch, disk_ms=disk_ms).run(steps)


def read_times(kind: str, batches: int, batch: int, folder: Path) -> list[float]:
    """Seconds to read and decode one batch on this thread, with nothing else running."""
    from netbrew.db.reader import DBReader

    with DBReader(db_path(kind, folder), kind) as reader:
        times = []
        for _ in range(batches + WARMUP):
            start = time.perf_counter()
            reader.read_batch(batch, 2)
            times.append(time.perf_counter() - start)
    return times[WARMUP:]


def rows(disk_ms: float) -> dict[str, dict]:
    """Row label -> step_times keywords."""
    wait = f"minidb + {disk_ms:g} ms disk wait"
    return {
        "memory": {"kind": "memory"},
        "minidb": {"kind": "minidb"},
        "lmdb": {"kind": "lmdb"},
        "minidb, prefetch 0": {"kind": "minidb", "prefetch": 0},
        wait: {"kind": "minidb", "disk_ms": disk_ms},
        f"{wait}, prefetch 0": {"kind": "minidb", "disk_ms": disk_ms, "prefetch": 0},
    }


def _stats(runs: list[list[float]], memory: list[list[float]]) -> dict[str, float]:
    """Median and min in ms, their ratios to memory's, and the per-round ratios' spread."""
    pooled, pooled_memory = [t for run in runs for t in run], [t for run in memory for t in run]
    per_round = [statistics.median(a) / statistics.median(m) for a, m in zip(runs, memory)]
    return {
        "median": 1e3 * statistics.median(pooled),
        "median_ratio": statistics.median(pooled) / statistics.median(pooled_memory),
        "min": 1e3 * min(pooled),
        "min_ratio": min(pooled) / min(pooled_memory),
        "round_ratio": statistics.median(per_round),
        "round_low": min(per_round),
        "round_high": max(per_round),
    }


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:  # not Linux
        return "?"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--steps", type=int, default=20, help="per row and round")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--disk-ms", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=HERE / "DB_INPUT.md")
    args = parser.parse_args(argv)
    table = rows(args.disk_ms)
    times: dict[str, list[list[float]]] = {label: [] for label in table}
    reads: dict[str, list[float]] = {"minidb": [], "lmdb": []}
    loads = [_load()]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runners = {}
        for label, spec in table.items():
            spec = dict(spec)
            runners[label] = Row(spec.pop("kind"), args.batch, folder, **spec)
        for r in range(args.rounds):
            for label in list(table) if r % 2 == 0 else list(table)[::-1]:
                times[label].append(runners[label].run(args.steps))
            for kind in reads:
                reads[kind] += read_times(kind, args.steps, args.batch, folder)
    loads.append(_load())
    stats = {label: _stats(runs, times["memory"]) for label, runs in times.items()}
    lines = [
        "# Training from a DB: step time beside feeding from memory",
        "",
        f"Generated by `python benchmarks/db_input.py` on {datetime.date.today()}: the demo "
        f"CNN, batch {args.batch}; {args.rounds} interleaved rounds of {args.steps} steps "
        "per row, a fresh reader each; load average " + " -> ".join(loads) + " (2 cores, "
        "shared). Median and min pool all steps; a ratio is the row's over memory's; per "
        "round, the ratio of medians within each round, whose rows ran side by side.",
        "",
        "| data | prefetch | median ms | / memory | min ms | / memory | per round [range] |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, st in stats.items():
        prefetch = "-" if label == "memory" else table[label].get("prefetch", 4)
        lines.append(
            f"| {label} | {prefetch} | {st['median']:.2f} | {st['median_ratio']:.2f} "
            f"| {st['min']:.2f} | {st['min_ratio']:.2f} | {st['round_ratio']:.2f} "
            f"[{st['round_low']:.2f}-{st['round_high']:.2f}] |"
        )
    wait = f"minidb + {args.disk_ms:g} ms disk wait"
    hidden = []
    for stat in ("median", "min"):
        serial, overlapped = stats[f"{wait}, prefetch 0"][stat], stats[wait][stat]
        memory = stats["memory"][stat]
        hidden.append(
            f"{100 * (serial - overlapped) / (serial - memory):.0f}% by {stat}s ("
            f"{serial:.2f} ms -> {overlapped:.2f} ms per step; memory {memory:.2f} ms)"
        )
    lines += [
        "",
        "Reading a batch alone (read and decode on the calling thread, no training beside "
        "it), median: "
        + ", ".join(f"{k} {1e3 * statistics.median(v):.2f} ms" for k, v in reads.items())
        + ".",
        "",
        "Overlap: with the simulated disk wait, prefetch hides this much of the time that "
        "reading on the step's thread adds: " + "; ".join(hidden) + ".",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    notes = args.out.read_text().partition(NOTES)[2] if args.out.exists() else ""
    args.out.write_text(text + (f"\n{NOTES}{notes}" if notes else ""))


if __name__ == "__main__":
    main()
