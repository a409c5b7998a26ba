"""NetDef -> a backend-neutral plan of layers and steps, shared by to_torch and to_module.

The plan says which ops become layers (Conv -> Conv2d, Gemm/FC -> Linear, ...), where
every parameter lives in the module tree, and in what order forward runs layer calls and
functional ops. The backends (torch.nn, netbrew.nn) only build the layers and run the steps,
both through plan_module.py (the module tree, forward and printing they share).

Placement keeps every parameter blob name as a state_dict key:

- `layer1.0.conv1.weight` used by a Conv with `layer1.0.conv1.bias` -> a Conv2d at
  `layer1.0.conv1` (containers `layer1` and `layer1.0` in between);
- Caffe2's `conv1_w`, `conv1_b` -> a Conv2d at `conv1` whose state_dict keys
  `conv1.weight` and `conv1.bias` are renamed back to `conv1_w`, `conv1_b` (the
  `renames` map; backends apply it in state_dict and load_state_dict);
- any other parameter -> an attribute at its dotted path (`pos_embedding` on the root,
  `blocks.0.scale` on container `blocks.0`), used by functional steps;
- a name the backend cannot use (`training`, an attribute of every Module) -> a root
  attribute `p_training`, renamed back like Caffe2's names.

to_torch applies `renames` with state-dict hooks, to_module in its state_dict,
load_state_dict, named_parameters and named_buffers.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew.converters.module.plan_layers import RECOGNIZERS, linear_chain, static_ranks
from netbrew.executor.workspace import Workspace, _netdef
from netbrew.netdef.args import args_dict
from netbrew.netdef.autodiff import captured_reads
from netbrew.operators import get_schema
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

# (layer kind, spatial rank) -> class name, the same in torch.nn and netbrew.nn
LAYER_CLASSES: dict[tuple[str, int], str] = {
    ("Conv", 1): "Conv1d",
    ("Conv", 2): "Conv2d",
    ("Conv", 3): "Conv3d",
    ("ConvTranspose", 1): "ConvTranspose1d",
    ("ConvTranspose", 2): "ConvTranspose2d",
    ("ConvTranspose", 3): "ConvTranspose3d",
    ("BatchNorm", 1): "BatchNorm1d",
    ("BatchNorm", 2): "BatchNorm2d",
    ("BatchNorm", 3): "BatchNorm3d",
    ("Linear", 0): "Linear",
    ("LayerNorm", 0): "LayerNorm",
    ("Embedding", 0): "Embedding",
}
# where a layer's stateful attribute is a buffer rather than a parameter
BUFFERS = frozenset({"running_mean", "running_var", "num_batches_tracked"})
# ops whose inputs 3 and 4 are running statistics (buffers, also where no layer runs them)
_NORMS = frozenset({"BatchNormalization", "SpatialBN"})
_SUFFIXES = ("_w", "_b", "_weight", "_bias", "_s", "_rm", "_riv", "_scale")


@dataclass
class Layer:
    """A layer: class LAYER_CLASSES[kind, rank](**config) at `path` holding `params`."""

    path: str
    kind: str
    rank: int
    config: dict[str, Any]
    params: dict[str, str]  # attribute ("weight") -> blob name

    @property
    def class_name(self) -> str:
        return LAYER_CLASSES[self.kind, self.rank]


@dataclass
class Step:
    """One forward step: a layer call (`layer` set) or a functional op."""

    op: OperatorDef
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)  # parsed, defaults filled
    layer: Layer | None = None
    flatten_axis: int | None = None  # FC: flatten the input at this axis first
    captured: list[str] = field(default_factory=list)  # outer blobs its subgraphs read


@dataclass
class Plan:
    """What the backends build: layers, parameter placement, and the forward steps."""

    name: str
    inputs: list[str]
    outputs: list[str]
    params: dict[str, np.ndarray]  # blob -> value, in init-net order
    layers: dict[str, Layer]  # path -> layer
    placement: dict[str, tuple[str, str]]  # blob -> (module path, attribute)
    renames: dict[str, str]  # natural state_dict key -> blob name, where they differ
    steps: list[Step]
    buffers: set[str] = field(default_factory=set)  # other params kept as buffers

    def containers(self) -> list[str]:
        """Module paths that hold no layer, parents before children."""
        paths = set()
        for path, _ in self.placement.values():
            parts = path.split(".") if path else []
            paths.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return sorted(paths - set(self.layers), key=lambda p: (p.count("."), p))


# -- the plan ----------------------------------------------------------------------------


def _stem(op: OperatorDef, blobs: list[str]) -> str:
    """A layer path for Caffe2-style names: conv1_w, conv1_b -> conv1 (else the op's output)."""
    stem = os.path.commonprefix(blobs)
    if len(blobs) == 1:
        stem = next((stem[: -len(s)] for s in _SUFFIXES if stem.endswith(s)), stem)
    stem = stem.rstrip("_.")
    return stem or op.output[0]


class _Placer:
    """Assigns every parameter a (module path, attribute), keeping names where it can."""

    def __init__(self, reserved: Callable[[str], bool]) -> None:
        self.reserved = reserved
        self.kind: dict[str, str] = {"": "module"}  # path -> module | layer | attr
        self.placement: dict[str, tuple[str, str]] = {}
        self.renames: dict[str, str] = {}

    def _valid(self, name: str) -> bool:
        return bool(name) and "." not in name and not self.reserved(name)

    def free_module(self, path: str) -> bool:
        parts = path.split(".")
        if not all(self._valid(p) for p in parts):
            return False
        prefixes = [".".join(parts[:k]) for k in range(1, len(parts))]
        return all(self.kind.get(p, "module") == "module" for p in prefixes)

    def claim(self, path: str, kind: str) -> None:
        parts = path.split(".")
        for k in range(1, len(parts)):
            self.kind[".".join(parts[:k])] = "module"
        self.kind[path] = kind

    def place(self, blob: str, path: str, attr: str) -> None:
        self.placement[blob] = (path, attr)
        key = f"{path}.{attr}" if path else attr
        if key != blob:
            self.renames[key] = blob

    def layer(self, path: str) -> bool:
        if path in self.kind or not self.free_module(path):
            return False
        self.claim(path, "layer")
        return True

    def loose(self, blob: str) -> bool:
        path, _, attr = blob.rpartition(".")
        if blob in self.kind or not self._valid(attr) or self.kind.get(path, "module") != "module":
            return False
        if path and not self.free_module(path):
            return False
        self.claim(blob, "attr")
        self.place(blob, path, attr)
        return True

    def fresh(self, stem: str, as_layer: bool) -> str:
        """An unused name made from stem; a layer keeps the dots of a free dotted path."""
        base = stem if as_layer and self.free_module(stem) else stem.replace(".", "_")
        if not self.free_module(base):
            base = f"p_{base}"
        name, k = base, 0
        while not (self.layer(name) if as_layer else name not in self.kind):
            k += 1
            name = f"{base}_{k}"
        return name


def _natural_path(layer: Layer) -> str | None:
    """P where the layer's blobs are exactly P.weight, P.bias, ... (torch's own names)."""
    paths = {b.rpartition(".")[0] for b in layer.params.values()}
    path = paths.pop()
    if paths or not path:
        return None
    return path if all(b == f"{path}.{a}" for a, b in layer.params.items()) else None


def _place(layers: list[Layer], params: dict, stems: list[str], reserved) -> _Placer:
    """Layers with torch-style names first, then other parameters at their own dotted
    paths, then layers under a path derived from their names, then what is left on the
    root under a sanitised name (renamed back in state_dict)."""
    placer = _Placer(reserved)
    pending = []
    for layer, stem in zip(layers, stems):
        path = _natural_path(layer)
        if path is not None and placer.layer(path):
            layer.path = path
        else:
            pending.append((layer, stem))
    claimed = {b for layer in layers for b in layer.params.values()}
    loose = [b for b in params if b not in claimed and not placer.loose(b)]
    for layer, stem in pending:
        layer.path = placer.fresh(stem, as_layer=True)
    for layer in layers:
        for attr, blob in layer.params.items():
            placer.place(blob, layer.path, attr)
    for blob in loose:
        name = placer.fresh(blob, as_layer=False)
        placer.claim(name, "attr")
        placer.place(blob, "", name)
    return placer


def _run_init(init_net: NetDef | None) -> dict[str, np.ndarray]:
    from netbrew.executor.predictor import refuse_file_ops

    if init_net is None:
        return {}
    refuse_file_ops(init_net, "module conversion")
    ws = Workspace()
    ws.run_net_once(init_net)
    names = dict.fromkeys(o for op in init_net.op for o in op.output if o)
    return {n: ws.fetch_blob(n) for n in names}


def _interface(net: NetDef, params: dict) -> tuple[list[str], list[str]]:
    """The net's feeds (external inputs that are not parameters, then any other blob read
    before it is written) and its outputs."""
    inputs = [b for b in net.external_input if b not in params]
    known = set(inputs) | set(params)
    for op in net.op:
        inputs += [b for b in op.input if b and b not in known]
        known.update(op.input)
        known.update(op.output)
    outputs = list(net.external_output) or (list(net.op[-1].output) if net.op else [])
    return list(dict.fromkeys(inputs)), outputs


def build_plan(
    init_net: Any,
    predict_net: Any,
    *,
    reserved: Callable[[str], bool] = lambda name: False,
    available: Callable[[str], bool] = lambda class_name: True,
) -> Plan:
    """Recognises layers in a NetDef and places its parameters (see the module docstring).

    Args:
        init_net: fills the parameters (a Net or NetDef, run once here in a Workspace);
            None for none.
        predict_net: the forward net (a Net or NetDef).
        reserved: names a backend cannot use as a module or attribute name (torch:
            attributes of torch.nn.Module such as "training" or "forward").
        available: whether the backend has a layer class (by LAYER_CLASSES name); ops
            whose layer it lacks stay functional.
    """
    init_net, predict_net = _netdef(init_net), _netdef(predict_net)
    params = _run_init(init_net)
    inputs, outputs = _interface(predict_net, params)
    ranks = static_ranks(predict_net, params)
    uses = Counter(b for op in predict_net.op for b in op.input if b)
    layers: list[Layer] = []
    stems: list[str] = []
    steps: list[Step] = []
    ops = predict_net.op
    i = 0
    while i < len(ops):
        op = ops[i]
        attrs = get_schema(op.type).parse_attrs(args_dict(op.arg), f"op #{i} {op.type}")
        n, step = _layer_step(predict_net, i, attrs, params, ranks, uses, set(outputs))
        if step is not None and available(step.layer.class_name):
            step.layer = _claim(step.layer, layers, stems, op)
        else:
            step = None
        if step is None or step.layer is None:
            n, step = 1, Step(op, list(op.input), list(op.output), attrs, None, None)
            step.captured = captured_reads(op)  # If, Loop: their bodies read blobs by name
        steps.append(step)
        i += n
    placer = _place(layers, params, stems, reserved)
    running = [s.op.input[3:5] for s in steps if s.layer is None and s.op.type in _NORMS]
    return Plan(
        name=predict_net.name or "net",
        inputs=inputs,
        outputs=outputs,
        params=params,
        layers={layer.path: layer for layer in layers},
        placement=placer.placement,
        renames=placer.renames,
        steps=steps,
        buffers={b for pair in running for b in pair if b in params},
    )


def _layer_step(net, i, attrs, params, ranks, uses, outputs) -> tuple[int, Step | None]:
    """(ops consumed, a layer step whose `layer` is a candidate Layer), or (1, None)."""
    op = net.op[i]
    chain = linear_chain(net, i, params, uses, outputs)
    if chain is not None:
        n, x, y, names = chain
        w = params[names["weight"]]
        config = {"in_features": w.shape[1], "out_features": w.shape[0], "bias": "bias" in names}
        return n, Step(op, [x], [y], attrs, Layer("", "Linear", 0, config, names))
    state = op.input[:1] if op.type == "Gather" else op.input[1:]
    if op.type not in RECOGNIZERS or any(b and b not in params for b in state):
        return 1, None  # a layer's state must be parameters, not computed blobs
    arrays = [params.get(b) if b else None for b in op.input]
    found = RECOGNIZERS[op.type](op, attrs, arrays, ranks)
    if found is None:
        return 1, None
    if found[0] == "BatchNorm":
        found = (*found[:3], {**found[3], **_batches_tracked(found[3], params)})
    x = op.input[1] if op.type == "Gather" else op.input[0]
    flatten = 1 if op.type == "FC" else None
    return 1, Step(op, [x], list(op.output), attrs, Layer("", *found), flatten_axis=flatten)


def _batches_tracked(names: dict[str, str], params: dict) -> dict[str, str]:
    """A torch BatchNorm's counter, P.num_batches_tracked beside P.running_mean, which
    no op reads (from_torch keeps it in the init net): it stays with its layer."""
    mean = names.get("running_mean", "")
    if not mean.endswith(".running_mean"):
        return {}
    blob = mean[: -len("running_mean")] + "num_batches_tracked"
    return {"num_batches_tracked": blob} if blob in params else {}


def _claim(candidate: Layer, layers: list[Layer], stems: list[str], op: OperatorDef):
    """The Layer a recognised op calls: the candidate, a known layer with the same state
    and configuration (a layer called twice), or None where its parameters already belong
    to a different layer (the op then runs as a functional step)."""
    for layer in layers:
        if layer.params == candidate.params:
            same = (layer.kind, layer.rank, layer.config) == (
                candidate.kind,
                candidate.rank,
                candidate.config,
            )
            return layer if same else None
    owned = {b for layer in layers for b in layer.params.values()}
    if owned & set(candidate.params.values()):
        return None
    layers.append(candidate)
    stems.append(_stem(op, list(candidate.params.values())))
    return candidate
