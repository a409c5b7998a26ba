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
for --steps steps (after 10 warm-up steps) with a fresh reader, in alternating order;
medians and minima pool all rounds, and the per-round ratios give the spread.

    python benchmarks/db_input.py [--rounds 20] [--steps 30] [--batch 64] [--disk-ms 2]

Writes benchmarks/DB_INPUT.md (or --out).
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
WARMUP = 10


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

    def _fresh_reader(self) -> None:
        """A new reader, its queue empty: no batches read ahead while other rows ran."""
        (create_db,) = [op for op in self.model.param_init_net.proto().op if op.type == "CreateDB"]
        self.ws.run_operator_once(create_db)
        if self.disk_ms:
            _with_disk_wait(self.ws.fetch_blob(self.reader_blob).item(), self.disk_ms)

    def run(self, steps: int) -> list[float]:
        """Seconds per step of `steps` steps, after WARMUP steps; a DB's reader is new
        for the block and closed after it."""
        if self.from_db:
            self._fresh_reader()
        x, y, batch, ws = self.x, self.y, self.batch, self.ws
        times = []
        try:
            for step in range(steps + WARMUP):
                start = time.perf_counter()
                if not self.from_db:  # the batch costs what feeding it costs
                    pick = self.rng.choice(len(y), batch, replace=False)
                    ws.feed_blob("data", x[pick])
                    ws.feed_blob("label", y[pick])
                ws.run_net(self.model.net.name)
                if step >= WARMUP:
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30, help="per row and round")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--disk-ms", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=HERE / "DB_INPUT.md")
    args = parser.parse_args(argv)
    table = rows(args.disk_ms)
    times: dict[str, list[list[float]]] = {label: [] for label in table}
    reads: dict[str, list[float]] = {"minidb": [], "lmdb": []}
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
    memory = times["memory"]
    lines = [
        "# Training from a DB: step time beside feeding from memory",
        "",
        f"Generated by `python benchmarks/db_input.py` on {datetime.date.today()}: the demo "
        f"CNN, batch {args.batch}; {args.rounds} interleaved rounds of {args.steps} steps "
        "per row, a fresh reader each. Median and min pool all steps; the ratio is the row's "
        "median over memory's, and per round it is taken within each round, whose rows ran "
        "side by side.",
        "",
        "| data | prefetch | ms per step (median) | min | / memory | per round: median [range] |",
        "|---|---|---|---|---|---|",
    ]
    median_ms = {}
    for label, runs in times.items():
        pooled = [t for run in runs for t in run]
        median_ms[label] = ms = 1e3 * statistics.median(pooled)
        ratio = ms / (1e3 * statistics.median([t for run in memory for t in run]))
        per_round = [statistics.median(a) / statistics.median(m) for a, m in zip(runs, memory)]
        prefetch = "-" if label == "memory" else table[label].get("prefetch", 4)
        lines.append(
            f"| {label} | {prefetch} | {ms:.2f} | {1e3 * min(pooled):.2f} | {ratio:.2f} "
            f"| {statistics.median(per_round):.2f} [{min(per_round):.2f}-{max(per_round):.2f}] |"
        )
    wait = f"minidb + {args.disk_ms:g} ms disk wait"
    serial, overlapped = median_ms[f"{wait}, prefetch 0"], median_ms[wait]
    hidden = (serial - overlapped) / (serial - median_ms["memory"])
    lines += [
        "",
        "Reading a batch alone (read and decode on the calling thread, no training beside "
        "it), median: "
        + ", ".join(f"{k} {1e3 * statistics.median(v):.2f} ms" for k, v in reads.items())
        + ".",
        "",
        f"Overlap: with the simulated disk wait, prefetch hides {100 * hidden:.0f}% of the "
        f"time a read on the step's thread adds ({serial:.2f} ms -> {overlapped:.2f} ms "
        f"per step; memory {median_ms['memory']:.2f} ms).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
