"""The `netbrew` command: demo, info, run, convert, bench, draw."""

from __future__ import annotations

import argparse
import collections
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netbrew.errors import NetbrewError
from netbrew.proto.netbrew_pb2 import NetDef


def resolve_model(
    model: str, init: str | None = None, strict: bool = False
) -> tuple[NetDef | None, NetDef]:
    """(init_net, predict_net) from a model folder, a predict_net file plus --init, or an
    .onnx file (through import_model, the net the ONNX backend and Predictor run).

    strict: refuse a Caffe2 file whose ops ask for a GPU instead of running them on CPU."""
    from netbrew.netdef import load_net

    path = Path(model)
    if path.suffix.lower() == ".onnx":
        from netbrew.converters import onnx as nb_onnx

        if init:
            raise NetbrewError(f"{model}: an .onnx file carries its weights; drop --init {init}")
        return nb_onnx.import_model(path)
    if path.is_dir():
        predict = _first(path, ("predict_net.pb", "predict_net.pbtxt"))
        found_init = _first(path, ("init_net.pb", "init_net.pbtxt"), required=False)
        init = init or (str(found_init) if found_init else None)
        path = predict
    init_net, net = (load_net(init) if init else None), load_net(path)
    from netbrew.converters import caffe2

    if caffe2.looks_legacy(net):  # Caffe2 spellings: translate them once, here
        init_net, net = caffe2.load(init_net or NetDef(name="init"), net, strict=strict)
    return init_net, net


def _first(folder: Path, names: Sequence[str], required: bool = True) -> Path | None:
    for name in names:
        if (folder / name).exists():
            return folder / name
    if required:
        raise NetbrewError(f"{folder}: no {' or '.join(names)} in this folder")
    return None


def param_count(init_net: NetDef | None) -> int:
    """Elements created by the init net's fill ops (read from their shape arguments)."""
    from netbrew.netdef import args_dict

    total = 0
    for op in init_net.op if init_net is not None else ():
        args = args_dict(op.arg)
        if "shape" in args and isinstance(args["shape"], list):
            total += math.prod(args["shape"])
        else:
            total += sum(
                v.size for k, v in args.items() if k in ("values", "value") and hasattr(v, "size")
            )
    return total


def cmd_info(ns: argparse.Namespace) -> int:
    from netbrew.operators import KERNELS, SCHEMAS

    init_net, net = resolve_model(ns.model, ns.init, ns.strict)
    print(f"net {net.name or '<unnamed>'}: {len(net.op)} ops, type {net.type or 'simple'}")
    print(f"inputs:  {', '.join(net.external_input) or '-'}")
    print(f"outputs: {', '.join(net.external_output) or '-'}")
    if init_net is not None:
        print(f"parameters: {param_count(init_net):,} values in {len(init_net.op)} blobs")
    print("op histogram:")
    for op_type, count in collections.Counter(op.type for op in net.op).most_common():
        devices = sorted(d for (t, d) in KERNELS if t == op_type)
        where = ", ".join(devices) if op_type in SCHEMAS else "not a registered op"
        print(f"  {op_type:<28}{count:>5}   kernels: {where or 'none'}")
    print(f"draw it: netbrew draw {ns.model} -o net.svg")
    return 0


def cmd_draw(ns: argparse.Namespace) -> int:
    """Draws a model's predict net to .svg/.png/.pdf/.dot (netbrew.netdef.draw)."""
    from netbrew.netdef.draw import _graphviz, draw

    try:
        _graphviz()
    except ImportError as e:
        raise NetbrewError(str(e)) from None
    init_net, net = resolve_model(ns.model, ns.init)
    workspace = None
    if ns.input and not ns.no_shapes:  # shapes from a run on random inputs
        from netbrew.executor import Workspace

        workspace = Workspace()
        if init_net is not None:
            workspace.run_net_once(init_net)
        rng = np.random.default_rng(0)
        for name, shape in (_parse_shape(i) for i in ns.input):
            workspace.feed_blob(name, _random_feed(shape, input_dtype(net, name), rng))
        workspace.run_net_once(net)
    written = draw(net, ns.output, minimal=ns.minimal, shapes=not ns.no_shapes, workspace=workspace)
    print(f"{ns.model} -> {written} ({len(net.op)} ops)")
    return 0


def read_inputs(items: Sequence[str]) -> dict[str, np.ndarray]:
    """--input NAME=FILE.npy items as feeds."""
    feeds = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep:
            raise NetbrewError(f"--input {item!r}: expected NAME=FILE.npy")
        feeds[name] = np.load(file, allow_pickle=False)
    return feeds


def cmd_compare(ns: argparse.Namespace) -> int:
    """Prints nb.compare's report; exit status 1 when a blob diverges."""
    from netbrew.parity import PEERS, compare

    model: object = ns.model
    if not str(ns.model).lower().endswith(".onnx"):
        model = resolve_model(ns.model, ns.init)
    against = ns.against if ns.against in PEERS else Path(ns.against)
    report = compare(model, read_inputs(ns.input), against=against, rtol=ns.rtol, atol=ns.atol)
    print(report)
    return 0 if report.ok else 1


def cmd_run(ns: argparse.Namespace) -> int:
    from netbrew.executor import Predictor

    init_net, net = resolve_model(ns.model, ns.init, ns.strict)
    feeds = read_inputs(ns.input)
    outputs = Predictor(init_net, net, device=ns.device, strict=ns.strict).run(feeds)
    out_dir = Path(ns.output)
    files: dict[str, str] = {}
    for name in outputs:
        file = name.replace("/", "_") + ".npy"
        if file in files:
            raise NetbrewError(
                f"outputs {files[file]!r} and {name!r} would both be written to {file}"
            )
        files[file] = name
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, name in files.items():
        value, target = outputs[name], out_dir / file
        np.save(target, value)
        print(f"{name}: {value.dtype}{list(value.shape)} -> {target}")
    return 0


def input_dtype(net: Any, name: str) -> np.dtype:
    """An input's dtype as the net's value_info declares it, else float32."""
    from netbrew.netdef.tensor import dtype_of

    info = next((v for v in net.value_info if v.name == name), None)
    return np.dtype(dtype_of(info.data_type)) if info is not None else np.dtype(np.float32)


def _parse_shape(item: str) -> tuple[str, tuple[int, ...]]:
    name, sep, dims = item.partition("=")
    if sep and dims.lower() == "scalar":
        return name, ()
    try:
        shape = tuple(int(d) for d in dims.lower().split("x")) if sep else None
    except ValueError:
        shape = None
    if not shape:
        raise NetbrewError(
            f"--input {item!r}: expected NAME=DxDxD, e.g. data=1x3x224x224, or NAME=scalar"
        )
    return name, shape


def cmd_convert(ns: argparse.Namespace) -> int:
    """.onnx -> model folder, or model folder / predict_net (+ --init) / .onnx -> .onnx
    (.onnx to .onnx re-exports the model, e.g. at another --opset)."""
    from netbrew.converters import onnx as nb_onnx

    src, dst = Path(ns.src), Path(ns.output)
    if src.suffix.lower() == ".onnx" and dst.suffix.lower() != ".onnx":
        from netbrew.converters import caffe2

        init_net, net = nb_onnx.import_model(src)
        caffe2.save(init_net, net, dst)
        print(f"{src} -> {dst}/init_net.pb, {dst}/predict_net.pb ({len(net.op)} ops)")
        return 0
    if dst.suffix.lower() != ".onnx":
        raise NetbrewError(f"{dst}: convert writes a model folder from .onnx, or an .onnx file")
    init_net, net = resolve_model(ns.src, ns.init)
    filled = {o for op in (init_net.op if init_net else ()) for o in op.output}
    inputs = dict(_parse_shape(i) for i in ns.input) or [
        b for b in net.external_input if b not in filled
    ]
    model = nb_onnx.export(
        net, init_net, inputs=inputs, opset=ns.opset, dynamic_batch=ns.dynamic_batch
    )
    dst.parent.mkdir(parents=True, exist_ok=True)
    from netbrew.netdef.serialize import write_atomic

    write_atomic(dst, model.SerializeToString())
    from netbrew.converters.onnx.importer import default_opset

    print(f"{src} -> {dst} (opset {default_opset(model)}, {len(model.graph.node)} nodes, checked)")
    return 0


def _random_feed(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(0, 2, shape).astype(dtype)


def cmd_bench(ns: argparse.Namespace) -> int:
    """Runs a model on random inputs and prints the per-op-type profile, the slowest ops
    and, with --trace, writes a Chrome trace."""
    from netbrew.executor.threads import num_threads

    if ns.threads is None:
        return _bench(ns)
    if ns.threads < 1:
        raise NetbrewError(f"--threads must be at least 1, got {ns.threads}")
    with num_threads(ns.threads):
        return _bench(ns)


def _bench(ns: argparse.Namespace) -> int:
    import time

    from netbrew import jit
    from netbrew.executor import Workspace, get_num_threads
    from netbrew.executor.predictor import refuse_file_ops

    is_onnx = Path(ns.model).suffix.lower() == ".onnx"
    if is_onnx:
        from netbrew.converters import onnx as nb_onnx

        init_net, net = nb_onnx.import_model(Path(ns.model), infer_shapes=ns.optimize)
    else:
        init_net, net = resolve_model(ns.model, ns.init)
    if ns.iters < 1:
        raise NetbrewError(f"--iters must be at least 1, got {ns.iters}")
    if ns.ops < 0:
        raise NetbrewError(f"--ops must be 0 or more, got {ns.ops}")
    ws = Workspace()
    if init_net is not None:
        refuse_file_ops(init_net, "bench")
        ws.run_net_once(init_net)
    refuse_file_ops(net, "bench")
    if ns.optimize:  # profile the net Predictor (or, for .onnx, the ONNX backend) would run
        from netbrew.executor.predictor import optimize_for_inference

        net = optimize_for_inference(net, ws, params_are_constant=is_onnx, device=ns.device)
    if ns.device != "cpu":
        net = _to_device(net, ws, ns.device, ns.strict)
    shapes = dict(_parse_shape(i) for i in ns.input)
    unknown = [n for n in shapes if n not in net.external_input]
    if unknown:
        raise NetbrewError(
            f"--input {unknown[0]!r}: not an input of the net; its inputs are: "
            f"{', '.join(b for b in net.external_input if not ws.has_blob(b)) or 'none'}"
        )
    info = {v.name: v for v in net.value_info}
    rng = np.random.default_rng(0)
    fed = []
    for name in net.external_input:
        if name in shapes:
            shape = shapes[name]
        elif ws.has_blob(name):
            continue
        elif name in info and not info[name].unknown_shape:
            unknown_dims = set(info[name].unknown_dims)
            shape = tuple(1 if i in unknown_dims else d for i, d in enumerate(info[name].dims))
        else:
            raise NetbrewError(f"input {name!r} has no known shape; give --input {name}=DxDxD")
        ws.feed_blob(name, _random_feed(shape, input_dtype(net, name), rng))
        fed.append(f"{name}={'x'.join(map(str, shape))}")
    ws.create_net(net)
    compiled, start = jit.compile_seconds(), time.perf_counter()
    ws.run_net(net.name)  # warm-up, not profiled: numba compiles (or loads) its kernels here
    first, compiled = time.perf_counter() - start, jit.compile_seconds() - compiled
    print(
        f"net {net.name or '<unnamed>'}: {len(net.op)} ops"
        f"{' after the inference passes' if ns.optimize else ''}, {ns.iters} runs, "
        f"random inputs {', '.join(fed) or 'none'}, BLAS threads {get_num_threads()}"
    )
    state = "on" if jit.enabled() else "off"
    print(
        f"first run (warm-up, not profiled) {first * 1e3:.1f} ms, of which numba compile "
        f"{compiled * 1e3:.1f} ms (or loading from its cache; JIT {state})"
    )
    later = jit.compile_seconds()
    profile = ws.run_net(net.name, num_iter=ns.iters, profile=True)
    print(f"numba compile in the profiled runs: {(jit.compile_seconds() - later) * 1e3:.1f} ms")
    if ns.ops:
        print(f"\nslowest ops (mean over {ns.iters} runs):")
        print(profile.op_table(ns.ops))
    if ns.trace is not None:
        print(f"\nChrome trace of the profiled runs: {profile.save_trace(ns.trace)}")
    return 0


def _to_device(net: NetDef, ws: Any, device: str, strict: bool) -> NetDef:
    """The parameters moved to `device` and the net placed there (copies, fallbacks)."""
    from netbrew.cuda import require
    from netbrew.executor.placement import plan_placement

    device = f"cuda:{require(device)}"  # DeviceError says what is missing
    params = ws.blobs()
    for name in params:
        ws.feed_blob(name, ws.fetch_blob(name), device=device)
    placed = plan_placement(net, device=device, params=params, params_device=device,
                            strict=strict)  # fmt: skip
    print(placed, file=sys.stderr)
    return placed.net


def cmd_demo(ns: argparse.Namespace) -> int:
    from netbrew.demo import main as demo_main
    from netbrew.distributed.world import launched_size

    if ns.workers > 1 and launched_size() == 1:  # start the ranks; each runs this command
        from netbrew.distributed.launch import launch

        args = ["-m", "netbrew.cli", "demo", "--workers", str(ns.workers), "-o", ns.output]
        db = ["--db", ns.db] if ns.db else []
        return launch(ns.workers, [*args, "--device", ns.device, *db])
    return demo_main(ns.output, device=ns.device, db=ns.db)


def cmd_launch(ns: argparse.Namespace) -> int:
    from netbrew.distributed.launch import launch

    return launch(ns.n, [ns.script, *ns.args], timeout=ns.timeout)


_STRICT = (
    "refuse a CPU fallback: a Caffe2 model whose ops ask for a GPU (without --device cuda), "
    "or an op without a CUDA kernel (with it)"
)
_DEVICE = "cpu (default), cuda or cuda:N: run on that GPU (netbrew[cuda])"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netbrew", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build, run, save, reload and verify a model, offline")
    demo.add_argument("-o", "--output", default="netbrew_demo", help="folder for the model")
    demo.add_argument(
        "--workers", type=int, default=1, help="train data-parallel over N MPI ranks (default 1)"
    )
    demo.add_argument("--device", default="cpu", help=_DEVICE)
    demo.add_argument(
        "--db",
        choices=["minidb", "lmdb"],
        default=None,
        help="first write the training images to a DB of this type in the output folder, "
        "then train from it (brew.db_input, read ahead on a background thread)",
    )
    demo.set_defaults(func=cmd_demo)
    launch = sub.add_parser("launch", help="run a Python script on N ranks under mpiexec")
    launch.add_argument("-n", type=int, default=2, help="how many ranks (default 2)")
    launch.add_argument("--timeout", type=float, help="end the whole job after this many s")
    launch.add_argument("script", help="the Python script each rank runs")
    launch.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    launch.set_defaults(func=cmd_launch)
    convert = sub.add_parser("convert", help="convert between .onnx and NetDef model folders")
    convert.add_argument("src", help=".onnx file, model folder, or predict_net .pb/.pbtxt")
    convert.add_argument("-o", "--output", required=True, help="model folder or .onnx file")
    convert.add_argument("--init", help="init_net file (when SRC is a predict_net file)")
    convert.add_argument("--input", action="append", default=[], help="NAME=1x3x224x224")
    convert.add_argument("--opset", type=int, help="ONNX opset to write (default newest)")
    convert.add_argument("--dynamic-batch", action="store_true", help="symbolic dimension 0")
    convert.set_defaults(func=cmd_convert)
    info = sub.add_parser("info", help="ops, parameters, inputs and outputs of a model")
    info.add_argument("model", help="predict_net .pb/.pbtxt, or a model folder")
    info.add_argument("--init", help="init_net file")
    info.add_argument("--strict", action="store_true", help=_STRICT)
    info.set_defaults(func=cmd_info)
    run = sub.add_parser("run", help="run a model on .npy inputs; writes outputs as .npy")
    run.add_argument("model", help="predict_net .pb/.pbtxt, or a model folder")
    run.add_argument("--init", help="init_net file")
    run.add_argument("--strict", action="store_true", help=_STRICT)
    run.add_argument("--device", default="cpu", help=_DEVICE)
    run.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeat)")
    run.add_argument("-o", "--output", default=".", help="folder for the output .npy files")
    run.set_defaults(func=cmd_run)
    cmp = sub.add_parser(
        "compare", help="run a model in netbrew and in onnxruntime: the first blob that differs"
    )
    cmp.add_argument("model", help=".onnx file, model folder, or predict_net .pb/.pbtxt")
    cmp.add_argument("--init", help="init_net file")
    cmp.add_argument("--input", action="append", default=[], help="NAME=FILE.npy (repeat)")
    cmp.add_argument(
        "--against",
        default="onnxruntime",
        help="onnxruntime, reference or torch (the same model), or an .onnx file run by "
        "onnxruntime (a NetDef's export)",
    )
    cmp.add_argument("--rtol", type=float, default=1e-4)
    cmp.add_argument("--atol", type=float, default=1e-5)
    cmp.set_defaults(func=cmd_compare)
    bench = sub.add_parser("bench", help="time a model's ops on random inputs")
    bench.add_argument("model", help="model folder, predict_net .pb/.pbtxt, or .onnx file")
    bench.add_argument("--init", help="init_net file")
    bench.add_argument("--device", default="cpu", help=_DEVICE)
    bench.add_argument("--strict", action="store_true", help=_STRICT)
    bench.add_argument(
        "--input", action="append", default=[], help="NAME=1x3x224x224 (default: value_info)"
    )
    bench.add_argument("--iters", type=int, default=10, help="profiled runs (default 10)")
    bench.add_argument(
        "--no-optimize",
        dest="optimize",
        action="store_false",
        help="profile the net as given, without the inference passes Predictor applies",
    )
    bench.add_argument(
        "--ops", type=int, default=10, help="list the N slowest ops (default 10; 0: none)"
    )
    bench.add_argument(
        "--threads", type=int, help="BLAS threads while it runs (default: the BLAS's own)"
    )
    bench.add_argument(
        "--trace", type=Path, help="write the profiled runs as a Chrome trace (JSON) here"
    )
    bench.set_defaults(func=cmd_bench)
    draw = sub.add_parser("draw", help="draw a model's net with Graphviz (.svg, .png, .dot)")
    draw.add_argument("model", help="model folder, predict_net .pb/.pbtxt, or .onnx file")
    draw.add_argument("-o", "--output", required=True, help="net.svg, net.png, net.pdf or net.dot")
    draw.add_argument("--init", help="init_net file")
    draw.add_argument("--minimal", action="store_true", help="ops only, no blob nodes")
    draw.add_argument("--no-shapes", action="store_true", help="no shape labels on the edges")
    draw.add_argument(
        "--input",
        action="append",
        default=[],
        help="NAME=1x3x224x224 (repeat): run on random float inputs and label the shapes seen",
    )
    draw.set_defaults(func=cmd_draw)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        return ns.func(ns)
    except (NetbrewError, OSError, ValueError) as e:
        print(f"netbrew {ns.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
