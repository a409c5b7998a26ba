"""Run ONNX's bundled light model-zoo models, and two PyTorch-built ones, in netbrew,
onnxruntime and ReferenceEvaluator.

The light models (onnx/backend/test/data/light) carry no weights: ConstantOfShape nodes fill
them with 0.02 at run time. As onnx's backend runner does for them, every graph input that
is not an initializer gets dummy data from its declared shape (batch 1), here seeded random
values. Beside them, zoo_torch builds a MobileNetV2 and a BERT-base encoder layer in PyTorch
and exports them with torch.onnx.export (cached; skipped, saying so, without torch).

netbrew runs each model through both of its entry points, each its own runtime here:
`Predictor(*import_model(path))` (netbrew-predictor) and the ONNX backend's
`backend.prepare(model)` (netbrew-backend); --entry picks one. Each runtime runs each model
in its own spawned subprocess (so its peak RSS, VmHWM, is its own) with the same thread
count, on the same inputs; outputs are compared against onnxruntime's. Prints medians, the
netbrew/ORT and ReferenceEvaluator/netbrew ratios, and writes benchmarks/RESULTS.md.

The timed runs of netbrew and onnxruntime are taken in alternating rounds (a fresh process
per runtime and round, each warmed up alike), so that a slow spell of a shared machine
falls on both rather than on whichever happened to run then; each round's netbrew/ORT
ratio is also taken on its own, and their median reported ('median of rounds'). On this
2-core VM netbrew's processes sometimes run 1.3x slower for tens of seconds while
onnxruntime's barely move (ResNet-50: 55 or 72 ms per process, onnxruntime 38-42 ms),
which five rounds outvote better than three.

    python benchmarks/zoo.py [--threads 2] [--reps 50] [--rounds 5] [--skip-reference]
        [--models resnet50 mobilenetv2 bert_layer ...] [--entry predictor backend]
        [--cache ~/.cache/netbrew/zoo]
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import platform
import queue as queue_module
import statistics
import sys
import time
from pathlib import Path

import zoo_torch

LIGHT = ("squeezenet", "shufflenet", "resnet50", "inception_v1", "densenet121", "vgg19")
MODELS = (*LIGHT, *zoo_torch.MODELS)
ENTRIES = ("predictor", "backend")  # netbrew's entry points, runtimes "netbrew-<entry>"
# ReferenceEvaluator takes seconds to minutes per run on these: one timed run only.
REFERENCE_REPS = 1
WARMUP = 3  # untimed runs in each process before its timed ones
# Known disagreements that are not netbrew's.
NOTES = {
    "squeezenet": "squeezenet, Reference = ORT: ReferenceEvaluator runs this opset-9 model's "
    "Softmax over the last axis alone (opset 13's default), which has size 1 in its "
    "(1, 1000, 1, 1) input, so it outputs 1.0 everywhere; opset 9 flattens from axis 1 on, "
    "giving 0.001, which netbrew and ORT agree on.",
    "densenet121": "densenet121, Reference = ORT: every output is 0.4610 in ORT and netbrew "
    "(which differ by 6e-8) and 1.5e-3 off (0.3%) in ReferenceEvaluator.",
}


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=50, help="timed runs per runtime and model")
    parser.add_argument(
        "--rounds", type=int, default=5, help="alternating rounds the timed runs are split into"
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument(
        "--entry", nargs="+", default=list(ENTRIES), choices=ENTRIES,
        help="netbrew's entry points to time: Predictor(*import_model(path)), backend.prepare",
    )  # fmt: skip
    parser.add_argument(
        "--cache", type=Path, default=zoo_torch.default_cache(),
        help="folder of the PyTorch models' ONNX exports (default ~/.cache/netbrew/zoo)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS.md"))
    return parser.parse_args(argv)


def model_path(name: str, cache: Path | None = None) -> str:
    """The .onnx file of zoo model `name`; a PyTorch-built one is exported into `cache` on
    first use."""
    import onnx

    if name in zoo_torch.MODELS:
        return str(zoo_torch.export_path(name, cache or zoo_torch.default_cache()))
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return str(root / f"light_{name}.onnx")


def dummy_inputs(model) -> dict:
    """Seeded random float32 data for every graph input that is not an initializer."""
    from onnx.backend.test.runner import Runner

    inits = {i.name for i in model.graph.initializer}
    inputs = [x for x in model.graph.input if x.name not in inits]
    return {
        x.name: Runner.generate_dummy_data(x, seed=i, random=True) for i, x in enumerate(inputs)
    }


def prepare_runtime(runtime: str, model, path: str, threads: int):
    """A function feeds -> list of outputs (in the graph's order), for `runtime`."""
    if runtime == "netbrew-predictor":  # as a user loads a file
        from netbrew.converters.onnx import import_model
        from netbrew.executor import Predictor

        predictor = Predictor(*import_model(path))
        names = [o.name for o in model.graph.output]

        def run(feeds):
            outputs = predictor.run(feeds)
            return [outputs[n] for n in names]

        return run
    if runtime == "netbrew-backend":
        from netbrew.converters.onnx import backend

        rep = backend.prepare(model)
        return lambda feeds: list(rep.run(feeds))
    if runtime == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3  # no warnings about the light models' unused initializers
        sess = ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )
        return lambda feeds: sess.run(None, feeds)
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    return lambda feeds: ref.run(None, feeds)


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(runtime: str, path: str, reps: int, warmup: int, threads: int, queue) -> None:
    """Runs in a spawned child: times `runtime` on the model at `path` after `warmup` untimed
    runs, puts (times, outputs, peak RSS MiB, error) on `queue`."""
    try:
        import onnx

        model = onnx.load(path)
        feeds = dummy_inputs(model)
        run = prepare_runtime(runtime, model, path, threads)
        for _ in range(max(warmup, 1)):
            outputs = run(feeds)
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            run(feeds)
            times.append(time.perf_counter() - start)
        queue.put((times, list(outputs), peak_rss_mib(), None))
    except Exception as e:  # reported, not fatal: the other runtimes still run
        queue.put(([], None, peak_rss_mib(), f"{type(e).__name__}: {e}"))


def measure(ctx, runtime: str, path: str, reps: int, warmup: int, threads: int) -> tuple:
    return run_child(ctx, worker, (runtime, path, reps, warmup, threads), ([], None, 0.0))


def run_child(ctx, target, args: tuple, failed: tuple) -> tuple:
    """Runs target(*args, queue) in a spawned process and returns what it put on the queue;
    `failed` plus an error message if the child dies before reporting (killed, failed
    import), which must not hang the parent."""
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    while True:
        try:
            result = queue.get(timeout=1.0)
            break
        except queue_module.Empty:
            if not proc.is_alive():
                result = (*failed, f"worker exited with code {proc.exitcode} before reporting")
                break
    proc.join()
    return result


def measure_rounds(ctx, runtimes, name: str, path: str, args) -> dict:
    """Times each of `runtimes` on model `name` (the file at `path`) in `args.rounds`
    alternating rounds (the ReferenceEvaluator once, after them). Returns runtime -> (median
    s over all its runs, outputs of its first round that ran, peak RSS MiB over its rounds,
    first error, fastest run s)."""
    timed = [r for r in runtimes if r != "reference"]
    rounds = max(1, min(args.rounds, args.reps))
    shares = [args.reps // rounds + (i < args.reps % rounds) for i in range(rounds)]
    plan = [(r, reps, WARMUP) for reps in shares for r in timed]
    if "reference" in runtimes:
        plan.append(("reference", REFERENCE_REPS, 1))
    got: dict[str, list] = {}
    began = time.perf_counter()
    for i, (runtime, reps, warmup) in enumerate(plan):
        print(
            f"[{time.perf_counter() - began:6.1f}s] {name}: {runtime} x{reps} "
            f"({i + 1}/{len(plan)})",
            file=sys.stderr,
        )
        times, outputs, rss, error = measure(ctx, runtime, path, reps, warmup, args.threads)
        if error:
            print(f"  failed: {error}", file=sys.stderr)
        elif times:
            print(f"  median {fmt_ms(statistics.median(times))} ms", file=sys.stderr)
        seen = got.setdefault(runtime, [[], None, 0.0, None, []])
        seen[0] += times
        seen[1] = outputs if seen[1] is None else seen[1]  # the first round that ran
        seen[2], seen[3] = max(seen[2], rss), seen[3] or error
        seen[4].append(statistics.median(times) if times else None)
    return {
        r: (
            statistics.median(times) if times else None,
            outputs,
            rss,
            error,
            min(times) if times else None,
            per_round,
        )
        for r, (times, outputs, rss, error, per_round) in got.items()
    }


def paired_ratio(rounds: list, ort_rounds: list) -> float | None:
    """The median over rounds of a runtime's round median divided by onnxruntime's in the
    same round: each ratio compares processes that ran seconds apart, so a slow spell of the
    machine that spans one round moves both sides of that round's ratio. None if a round
    failed."""
    pairs = list(zip(rounds, ort_rounds))
    if not pairs or any(a is None or b is None for a, b in pairs):
        return None
    return statistics.median(a / b for a, b in pairs)


def agree(outputs, reference, rtol=1e-3, atol=1e-4) -> str:
    import numpy as np

    if outputs is None or reference is None:
        return "n/a"
    worst = 0.0
    for a, b in zip(outputs, reference):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if a.shape != b.shape:
            return f"shape {a.shape} vs {b.shape}"
        err = np.abs(a - b) / (atol + rtol * np.abs(b))
        worst = max(worst, float(err.max(initial=0.0)))
    return "yes" if worst <= 1 else f"NO (max err/tol {worst:.1f})"


def fmt_ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def fmt_ratio(a, b) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def main(argv=None) -> None:
    args = parse(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # inherited by the spawned children
    ctx = mp.get_context("spawn")
    netbrews = [f"netbrew-{e}" for e in ENTRIES if e in args.entry]
    runtimes = [*netbrews, "onnxruntime", *([] if args.skip_reference else ["reference"])]
    rows, skipped, began = [], [], time.perf_counter()
    for name in args.models:
        path = resolve(name, args.cache)
        if not Path(path).exists():  # resolve said why
            skipped.append(f"{name} not run: {path}")
            print(f"skipping {name}: {path}", file=sys.stderr)
            continue
        res = measure_rounds(ctx, runtimes, name, path, args)
        base, ort = res["onnxruntime"][1], res["onnxruntime"]
        row = {
            "model": name,
            **{f"{r}_ms": fmt_ms(res[r][0]) for r in runtimes},
            **{f"{r}_rss": f"{res[r][2]:.0f}" for r in runtimes},
        }
        for r in netbrews:
            row[f"{r}/ort"] = fmt_ratio(res[r][0], ort[0])
            row[f"{r}/ort best"] = fmt_ratio(res[r][4], ort[4])
            row[f"{r}/ort paired"] = fmt_ratio(paired_ratio(res[r][5], ort[5]), 1.0)
            row[f"{r} agree"] = agree(res[r][1], base)
        slowest = [res[r][0] for r in netbrews]  # Reference / netbrew at netbrew's slowest
        slowest = None if None in slowest else max(slowest)
        row["ref/nb"] = fmt_ratio(res["reference"][0], slowest) if "reference" in res else "-"
        row["ref agree"] = agree(res["reference"][1], base) if "reference" in res else "-"
        rows.append(row)
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), file=sys.stderr)
    table = render(rows, runtimes, args, skipped)
    write_table(table, args.out, began)


def resolve(name: str, cache: Path) -> str:
    """The model's path, or why it cannot be run here (then not an existing path)."""
    if name in zoo_torch.MODELS:
        missing = zoo_torch.torch_missing()
        if missing:
            return missing
        print(f"exporting {name} from PyTorch (cached in {cache})", file=sys.stderr)
    return model_path(name, cache)


def write_table(table: str, out: Path, began: float) -> None:
    """Prints the markdown `table` and writes it to `out`, saying how long the run took
    (since perf_counter() read `began`)."""
    print(table)
    out.write_text(table)
    print(f"wrote {out} in {time.perf_counter() - began:.0f}s", file=sys.stderr)


def render(rows: list[dict], runtimes: list[str], args, skipped=()) -> str:
    import numpy as np
    import onnx
    import onnxruntime

    netbrews = [r for r in runtimes if r.startswith("netbrew-")]
    timed = [r for r in runtimes if r != "reference"]
    cols = ["model", *(f"{r}_ms" for r in runtimes)]
    cols += [*(f"{r}/ort" for r in netbrews), *(f"{r}/ort paired" for r in netbrews)]
    cols += [*(f"{r}/ort best" for r in netbrews), "ref/nb"]
    cols += [*(f"{r}_rss" for r in runtimes), *(f"{r} agree" for r in netbrews), "ref agree"]
    short = {r: r.removeprefix("netbrew-") for r in netbrews}
    heads = {f"{r}_ms": f"{r} ms" for r in runtimes}
    heads.update({f"{r}_rss": f"{r} peak RSS MiB" for r in runtimes})
    for r, e in short.items():
        heads[f"{r}/ort"] = f"{e} / ORT"
        heads[f"{r}/ort best"] = f"{e} / ORT (fastest runs)"
        heads[f"{r}/ort paired"] = f"{e} / ORT (median of rounds)"
        heads[f"{r} agree"] = f"{e} = ORT"
    heads.update({"ref/nb": "Reference / netbrew", "ref agree": "Reference = ORT"})
    lines = [
        "# Model zoo: netbrew vs onnxruntime vs onnx.reference",
        "",
        f"Generated by `python benchmarks/zoo.py` on {datetime.date.today()}, "
        f"{platform.machine()} {platform.processor() or ''} with {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, onnx {onnx.__version__}, "
        f"onnxruntime {onnxruntime.__version__}{torch_version()}.",
        "",
        "netbrew runs each model through two entry points: `predictor` is "
        "`Predictor(*import_model(path))`, `backend` is the ONNX backend's "
        "`backend.prepare(model)`. mobilenetv2 and bert_layer are built in PyTorch and "
        "exported with torch.onnx.export (opset 17; see benchmarks/zoo_torch.py); the rest "
        "are onnx's light model zoo.",
        "",
        f"Batch 1, seeded random inputs, {args.threads} threads everywhere "
        f"(ORT intra_op_num_threads, BLAS). Medians of {args.reps} runs, taken in "
        f"{args.rounds} alternating rounds of {', '.join(timed)}, "
        f"each round in a fresh process warmed up with {WARMUP} untimed runs "
        f"(ReferenceEvaluator: {REFERENCE_REPS} run). Peak RSS is the largest VmHWM of a "
        "runtime's processes, interpreter and imports included. "
        "Outputs agree when |a - b| <= 1e-4 + 1e-3 |b| against onnxruntime. Ratios are the "
        "figures to read; absolute times depend on the machine. 'Median of rounds' is the "
        "median over rounds of each round's netbrew / onnxruntime, processes seconds apart "
        "(a slow spell of a shared machine that hits one round moves both sides of its "
        "ratio, where it can move only one side of the ratio of medians); 'fastest runs' "
        "compares each runtime's quickest run, which other load on the machine disturbs least; "
        "Reference / netbrew divides by the slower entry point "
        f"(load average at the end: {os.getloadavg()[0]:.2f}).",
        "",
        "| " + " | ".join(heads.get(c, c) for c in cols) + " |",
        "|" + "|".join("---" for _ in cols) + "|",
    ]
    lines += ["| " + " | ".join(str(r.get(c, "-")) for c in cols) + " |" for r in rows]
    notes = [NOTES[r["model"]] for r in rows if r["model"] in NOTES and "reference" in runtimes]
    notes += list(skipped)
    lines += ["", *(f"- {note}" for note in notes)] if notes else []
    return "\n".join(lines) + "\n"


def torch_version() -> str:
    try:
        import torch
    except ImportError:
        return ""
    return f", torch {torch.__version__}"


if __name__ == "__main__":
    main()
