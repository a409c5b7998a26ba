"""How fast netbrew's kernels could run with both cores busy: two independent streams.

onnxruntime spreads each op over its intra-op threads; netbrew's ops run on one thread,
with only BLAS on two. This script measures what any scheme of threads over netbrew's
kernels could reach at best: with BLAS on one thread, two threads each run the whole model
on their own inputs at once, so both cores do nothing but netbrew's work, with no handoff
between them. The time per inference of those two streams (wall time / runs) is the floor
of netbrew's time per run for splitting ops across threads, as long as the kernels do the
work they do now; below it only less work goes (fewer passes over memory, fewer FLOPs).

Each figure comes from a fresh spawned process: netbrew as it runs by default (BLAS on two
threads), netbrew with BLAS on one thread (one stream, then two at once), and onnxruntime
(two intra-op threads). The processes alternate in rounds, so that a slow spell of a
shared machine falls on all of them.

    python benchmarks/streams.py [--models resnet50 shufflenet] [--reps 20] [--rounds 2]
        [--out benchmarks/STREAMS.md]
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # run as a script; an importer that put it there keeps it its own
    sys.path.insert(0, _HERE)
from zoo import (  # noqa: E402
    MODELS,
    dummy_inputs,
    fmt_ms,
    fmt_ratio,
    model_path,
    prepare_runtime,
    run_child,
    write_table,
)

WARMUP = 3  # untimed runs of each runtime (each stream) before the timed ones
MODES = {  # mode -> (runtime, BLAS threads)
    "netbrew": ("netbrew-predictor", 2),
    "one_thread": ("netbrew-predictor", 1),
    "onnxruntime": ("onnxruntime", 2),
}


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["resnet50", "shufflenet"], choices=MODELS)
    parser.add_argument("--reps", type=int, default=20, help="timed runs per stream and round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per mode")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("STREAMS.md"))
    return parser.parse_args(argv)


def time_runs(run, feeds, reps: int) -> list[float]:
    """Seconds of each of `reps` runs, after WARMUP untimed ones."""
    for _ in range(WARMUP):
        run(feeds)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run(feeds)
        times.append(time.perf_counter() - start)
    return times


def two_streams(runs: list, feeds: dict, reps: int) -> float:
    """Seconds per inference while two threads each run `reps` inferences, on their own
    prepared model, at once: the wall time over 2 * reps."""
    for run in runs:
        for _ in range(WARMUP):
            run(feeds)
    start_line = threading.Barrier(len(runs) + 1)

    def stream(run) -> None:
        start_line.wait()
        for _ in range(reps):
            run(feeds)

    threads = [threading.Thread(target=stream, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    start_line.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return (time.perf_counter() - start) / (len(runs) * reps)


def worker(mode: str, name: str, reps: int, queue) -> None:
    """Runs in a spawned child whose BLAS thread count the parent set: puts (per-run
    seconds, two-stream seconds per inference or None, error or None) on `queue`."""
    try:
        import onnx

        runtime, threads = MODES[mode]
        path = model_path(name)
        model = onnx.load(path)
        feeds = dummy_inputs(model)
        run = prepare_runtime(runtime, model, path, threads)
        times = time_runs(run, feeds, reps)
        both = None
        if mode == "one_thread":
            both = two_streams([run, prepare_runtime(runtime, model, path, threads)], feeds, reps)
        queue.put((times, both, None))
    except Exception as e:  # reported, not fatal: the other modes still run
        queue.put(([], None, f"{type(e).__name__}: {e}"))


def measure(ctx, mode: str, name: str, reps: int) -> tuple:
    blas = str(MODES[mode][1])
    saved = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    os.environ.update({v: blas for v in saved})  # read by the child's BLAS when it loads
    try:  # the child starts, and so reads the environment, before run_child waits on it
        return run_child(ctx, worker, (mode, name, reps), ([], None))
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


def measure_model(ctx, name: str, args) -> dict:
    """mode -> median seconds per run; "two_streams" -> median seconds per inference."""
    got: dict[str, list[float]] = {mode: [] for mode in MODES}
    got["two_streams"] = []
    began = time.perf_counter()
    for r in range(args.rounds):
        for mode in MODES:
            print(
                f"[{time.perf_counter() - began:6.1f}s] {name}: {mode} (round {r + 1})",
                file=sys.stderr,
            )
            times, both, error = measure(ctx, mode, name, args.reps)
            if error:
                print(f"  failed: {error}", file=sys.stderr)
            got[mode] += times
            if both is not None:
                got["two_streams"].append(both)
    return {k: statistics.median(v) if v else None for k, v in got.items()}


def render(rows: list[tuple[str, dict]], args) -> str:
    lines = [
        "# netbrew with both cores busy: two streams, beside onnxruntime",
        "",
        f"Generated by `python benchmarks/streams.py` on {datetime.date.today()}, "
        f"{platform.machine()} with {os.cpu_count()} cores. Medians of {args.reps} runs "
        f"per mode and round, {args.rounds} alternating rounds, each mode in a fresh process. "
        "'two streams' is the wall time per inference while two threads, BLAS on one thread "
        "each, run the model at once: the best per-run time any split of netbrew's ops "
        "across two threads could reach with the kernels as they are.",
        "",
        "| model | netbrew ms (BLAS 2 threads) | netbrew ms (1 thread) | two streams, ms per "
        "inference | onnxruntime ms (2 threads) | netbrew / ORT | two streams / ORT |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        nb, one, both, ort = r["netbrew"], r["one_thread"], r["two_streams"], r["onnxruntime"]
        cells = [name, fmt_ms(nb), fmt_ms(one), fmt_ms(both), fmt_ms(ort)]
        cells += [fmt_ratio(nb, ort), fmt_ratio(both, ort)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    args = parse(argv)
    ctx = mp.get_context("spawn")
    began = time.perf_counter()
    rows = [(name, measure_model(ctx, name, args)) for name in args.models]
    table = render(rows, args)
    write_table(table, args.out, began)


if __name__ == "__main__":
    main()
