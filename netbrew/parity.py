"""Where two runs of a model part ways: the first blob whose values disagree.

    report = nb.compare("model.onnx", {"x": x}, against="onnxruntime")
    print(report)        # every compared blob, and the first divergence
    report.first         # BlobDiff of the first blob out of tolerance, or None

netbrew runs `model` op by op and keeps every op's outputs. The peer answers every
intermediate value too: onnxruntime on the same ONNX model (`against="onnxruntime"`, every
node output added as a graph output), onnx's ReferenceEvaluator (`against="reference"`),
or the PyTorch module that netbrew.converters.module.to_torch builds from the model
(`against="torch"`, its `blobs()`, float32 on the CPU). `against` may also be another
ONNX model or path, run by onnxruntime, to compare a NetDef with its export. Blobs are
matched by name (the importer and exporter keep names), in netbrew's op order, so the
first blob out of tolerance is the first op that computed something else; the report
says whether its inputs agreed, which tells a wrong op from one fed wrong values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew.errors import NetbrewError

PEERS = ("onnxruntime", "reference", "torch")
STOPPED = "\0stopped"  # writers' entry for the error that stopped netbrew's run


@dataclass
class BlobDiff:
    """One blob computed by both runs."""

    name: str
    op: str  # "op #i Type 'name'", netbrew's op that wrote it
    inputs: tuple[str, ...]
    shapes: tuple[tuple[int, ...], tuple[int, ...]]  # netbrew's, the peer's
    max_abs: float
    max_rel: float
    ok: bool
    reason: str = ""  # why it is not ok when the values cannot be compared


@dataclass
class ParityReport:
    """The blobs both runs computed, in netbrew's op order, and the first divergence."""

    peer: str
    rtol: float
    atol: float
    diffs: list[BlobDiff] = field(default_factory=list)
    only_netbrew: list[str] = field(default_factory=list)
    netbrew_error: str = ""  # the op where netbrew's run stopped, and why

    @property
    def first(self) -> BlobDiff | None:
        return next((d for d in self.diffs if not d.ok), None)

    @property
    def ok(self) -> bool:
        return self.first is None and not self.netbrew_error

    def inputs_agreed(self, diff: BlobDiff) -> bool:
        """Whether every input of `diff`'s op that both runs have matched."""
        by_name = {d.name: d for d in self.diffs}
        return all(by_name[i].ok for i in diff.inputs if i in by_name)

    def __str__(self) -> str:
        head = (
            f"netbrew against {self.peer}: {len(self.diffs)} blobs compared "
            f"(rtol={self.rtol:g}, atol={self.atol:g})"
        )
        lines = [head]
        first = self.first
        if self.netbrew_error:
            lines.append(f"netbrew stopped: {self.netbrew_error}")
        if first is None:
            lines.append(
                "every compared blob agrees" + (" up to there" if self.netbrew_error else "")
            )
        else:
            fed = "its inputs agreed" if self.inputs_agreed(first) else "its inputs differed too"
            lines.append(
                f"first divergence: {first.name!r}, written by {first.op} ({fed}): "
                + (first.reason or f"max |diff| {first.max_abs:.3g}, max rel {first.max_rel:.3g}")
            )
        lines.append(f"{'blob':<32} {'op':<36} {'max |diff|':>11} {'max rel':>9}  ok")
        for d in self.diffs:
            lines.append(f"{d.name[:32]:<32} {d.op[:36]:<36} {d.max_abs:>11.3g} "
                         f"{d.max_rel:>9.3g}  {'yes' if d.ok else 'NO'}")  # fmt: skip
        if self.only_netbrew:
            lines.append(f"not in the peer's run: {', '.join(self.only_netbrew)}")
        return "\n".join(lines)


def compare(
    model: Any,
    inputs: Mapping[str, Any],
    *,
    against: Any = "onnxruntime",
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> ParityReport:
    """Runs `model` in netbrew and in a peer on `inputs` and compares every blob both
    compute (see the module docstring).

    Args:
        model: an ONNX ModelProto or .onnx path, or (init_net, predict_net) NetDefs.
        inputs: the feeds, by name.
        against: "onnxruntime" or "reference" (then `model` must be ONNX), "torch" (the
            module to_torch builds), or an ONNX ModelProto or path, run by onnxruntime.
        rtol, atol: the tolerance, as numpy.isclose's.

    Raises:
        NetbrewError: the peer cannot run `model` (a NetDef without an ONNX form), or
            the two runs compute no blob in common.
    """
    onnx_model = _onnx_model(model)
    feeds = {k: np.asarray(v) for k, v in inputs.items()}
    source = model
    if onnx_model is not None:  # imported once; declared inputs: check feeds before a peer
        source = _nets(onnx_model)
        feeds = _checked_feeds(source, feeds)
    if isinstance(against, str) and against == "torch":
        label, peer = "torch (to_torch)", lambda: _torch_values(source, feeds)
    elif isinstance(against, str) and against in PEERS:
        if onnx_model is None:
            raise NetbrewError(
                f"compare: against={against!r} runs the same ONNX model, but the model is a "
                "NetDef; pass its ONNX export as `against`"
            )
        label, peer = against, lambda: _peer_values(onnx_model, feeds, against)
    else:
        peer_model = _onnx_model(against)
        if peer_model is None:
            raise NetbrewError(
                f"compare: against must be {' or '.join(map(repr, PEERS))} or an ONNX model, "
                f"got {type(against).__name__}"
            )
        label, peer = (
            f"onnxruntime on {peer_model.graph.name!r}",
            lambda: _peer_values(peer_model, feeds, "onnxruntime"),
        )
    ours, writers = _netbrew_values(source, feeds)
    return _report(label, ours, writers, peer(), rtol, atol)


def _report(label: str, ours: dict, writers: dict, theirs: dict, rtol, atol) -> ParityReport:
    report = ParityReport(label, rtol, atol, netbrew_error=writers.pop(STOPPED, ""))
    for name, (where, op_inputs) in writers.items():
        if name not in theirs or theirs[name] is None:
            report.only_netbrew.append(name)
            continue
        report.diffs.append(_diff(name, where, op_inputs, ours[name], theirs[name], rtol, atol))
    if not report.diffs and not report.netbrew_error:
        raise NetbrewError(
            "compare: the two runs computed no blob of the same name; "
            f"netbrew wrote {sorted(writers)[:8]}, the peer {sorted(theirs)[:8]}"
        )
    return report


def _nets(model: Any) -> tuple:
    """(init_net, predict_net) of NetDefs or an ONNX model."""
    if isinstance(model, tuple) and len(model) == 2:
        return model
    from netbrew.converters.onnx import import_model

    return import_model(model)


def _torch_values(model: Any, feeds: dict) -> dict:
    """Every blob of the to_torch module's forward, as NumPy arrays."""
    import torch

    from netbrew.converters.module import to_torch

    module = to_torch(*_nets(model))
    missing = [n for n in module.input_names if n not in feeds]
    if missing:
        raise NetbrewError(f"compare: no value given for input(s) {missing} of the module")
    with torch.no_grad():
        env = module.blobs(*(torch.from_numpy(np.ascontiguousarray(feeds[n]))
                             for n in module.input_names))  # fmt: skip
    return {k: v.detach().numpy() if hasattr(v, "detach") else v for k, v in env.items()}


def _checked_feeds(nets: tuple, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The feeds, checked as Predictor checks them (names, dtypes, ranks): a bad feed is
    one FeedError naming the input, not a peer's own failure."""
    from netbrew.executor.predictor import Predictor

    return Predictor(*nets, optimize=False).check_feeds(inputs)


def _onnx_model(model: Any):
    import onnx

    from netbrew.converters.onnx.importer import load_onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)) and str(model).lower().endswith(".onnx"):
        loaded, folder = load_onnx(model)  # ModelLoadError names the file
        onnx.load_external_data_for_model(loaded, folder)
        return loaded
    return None


def _netbrew_values(model: Any, feeds: dict) -> tuple[dict, dict]:
    """Every op's outputs as netbrew computes them, and each blob's last writer."""
    from netbrew.executor import Workspace

    init, predict = _nets(model)
    ws = Workspace()
    if init is not None:
        ws.run_net_once(init)
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    values, writers = {}, {}
    for index, op in enumerate(predict.op):
        try:
            ws.run_operator_once(op)
        except NetbrewError as e:  # compare what ran; the report names where it stopped
            message = str(e).splitlines()[0]  # run alone, the op was "op #0"
            writers[STOPPED] = message.replace("op #0 ", f"op #{index} ", 1)
            break
        where = f"op #{index} {op.type}" + (f" {op.name!r}" if op.name else "")
        for out in op.output:
            if out and ws.has_blob(out):
                value = ws.fetch_blob(out)
                values[out] = np.array(value, copy=True) if isinstance(value, np.ndarray) else value
                writers.pop(out, None)  # keep op order: a rewritten blob moves to its writer
                writers[out] = (where, tuple(i for i in op.input if i))
    return values, writers


def _peer_values(model, feeds: dict, peer: str) -> dict:
    """Every value of `model`'s run by the peer, intermediate ones included."""
    graph_inputs = {i.name for i in model.graph.input}
    feeds = {k: v for k, v in feeds.items() if k in graph_inputs}
    if peer == "reference":
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds, intermediate=True)
    import onnx
    import onnxruntime as ort
    from onnx import helper

    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    listed = {o.name for o in wide.graph.output}
    names = [o for node in wide.graph.node for o in node.output if o and o not in listed]
    wide.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    try:
        session = ort.InferenceSession(wide.SerializeToString(), providers=["CPUExecutionProvider"])
        results = session.run(None, feeds)
    except Exception as e:  # onnxruntime's own exception types
        raise NetbrewError(f"compare: onnxruntime cannot run the model: {e}") from e
    return dict(zip([o.name for o in session.get_outputs()], results))


def _diff(name, where, op_inputs, a, b, rtol, atol) -> BlobDiff:
    a, b = np.asarray(a), np.asarray(b)
    shapes = (tuple(a.shape), tuple(b.shape))
    if a.shape != b.shape:
        return BlobDiff(name, where, op_inputs, shapes, np.inf, np.inf, False,
                        f"shapes differ: {list(a.shape)} against {list(b.shape)}")  # fmt: skip
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        same = bool(np.array_equal(a, b))
        return BlobDiff(name, where, op_inputs, shapes, 0.0 if same else np.inf,
                        0.0 if same else np.inf, same, "" if same else "values differ")  # fmt: skip
    x, y = a.astype(np.float64), b.astype(np.float64)
    if not x.size:
        return BlobDiff(name, where, op_inputs, shapes, 0.0, 0.0, True)
    diff = np.abs(x - y)
    both_nan = np.isnan(x) & np.isnan(y)
    diff[both_nan] = 0.0
    diff[np.isnan(diff)] = np.inf  # NaN on one side only
    scale = np.abs(y)
    rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
    ok = bool(np.all((diff <= atol + rtol * scale) | both_nan))
    return BlobDiff(name, where, op_inputs, shapes, float(np.nanmax(diff)),
                    float(np.nanmax(rel)), ok)  # fmt: skip
