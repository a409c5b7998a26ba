"""torch.nn.Module -> (init_net, predict_net), through torch.fx.

    >>> init_net, predict_net = from_torch(model.eval(), torch.randn(2, 3, 64, 64))
    >>> Predictor(init_net, predict_net).run({"x": x})

`torch.fx.symbolic_trace` gives the graph; a `ShapeProp` pass over the example inputs
records every node's value, so converters know shapes and dtypes and so Python values
(`x.size(0)`, `x.shape[1:]`, ints computed from them) fold to constants. Sizes read
directly from a tensor stay dynamic where they feed a reshape: `x.view(x.size(0), -1)`
becomes `Reshape(x, [0, -1])` and `q.view(B, T, H, D)` with `B, T = x.shape[:2]` reads
`Shape(x)` at run time, so the net runs at other batch sizes. Arithmetic on sizes is folded
to the example's value.

Names: parameter and buffer blobs are exactly the module's state_dict keys
(`layer1.0.conv1.weight`); the init net fills each with its value (GivenTensor*Fill, or
Constant for dtypes those lack). Inputs are the forward's argument names (or
`input_names`), other blobs the fx node names. Tensors that are not in the state_dict
(plain tensor attributes, results of calls without tensor inputs) become Constant ops in
the predict net.

Modules convert with eval-mode semantics only: BatchNorm, Dropout and F.dropout calls that
would behave differently in training mode are refused (call `.eval()` first), so a
converted net never silently differs from the module it came from. Every call that cannot
be converted is reported at once, in one UnsupportedConversion.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.brew.initializers import add_given_fill
from netbrew.converters.module.torch_graph import (
    WRAPPED,
    Problem,
    TorchGraph,
    import_torch,
    target_name,
    to_numpy,
)
from netbrew.converters.module.torch_ops import lookup
from netbrew.errors import UnsupportedConversion
from netbrew.netdef.tensor import data_type_of
from netbrew.proto.netbrew_pb2 import NetDef

# Python-valued calls that read tensor data: folding them would bake in the example's data.
_DATA_DEPENDENT = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "numpy"})


# -- tracing and walking the graph -------------------------------------------------------


def _trace(torch: Any, module: Any, n_inputs: int) -> Any:
    """symbolic_trace, or for a lone torch.nn layer (which fx would trace into, not call)
    a graph with one call of it."""
    if not torch.fx.Tracer().is_leaf_module(module, ""):
        return torch.fx.symbolic_trace(module)
    import inspect

    graph = torch.fx.Graph()
    names = list(inspect.signature(module.forward).parameters)[:n_inputs]
    call = graph.call_module(WRAPPED, tuple(graph.placeholder(n) for n in names))
    call.name = type(module).__name__.lower()
    graph.output(call)
    root = torch.nn.Module()
    root.add_module(WRAPPED, module)
    return torch.fx.GraphModule(root, graph)


def _record(torch: Any, gm: Any, inputs: Sequence[Any]) -> dict:
    """Runs ShapeProp on the example inputs, keeping each node's value as well."""
    from torch.fx.passes.shape_prop import ShapeProp

    values: dict = {}

    class Recorder(ShapeProp):
        def run_node(self, n):
            values[n] = result = super().run_node(n)
            return result

    with torch.no_grad():
        Recorder(gm).propagate(*inputs)
    return values


def _has_tensor(torch: Any, value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(torch, v) for v in value)
    return False


def _provenance(g: TorchGraph, node: Any) -> Any:
    """(tensor node, dim) for a size read off a tensor, a list of them for a whole shape."""
    args = node.args
    source = args[0] if args else None
    if g.is_node(source) and isinstance(g.blobs.get(source), str):
        rank = g.tensor(source).dim()
        whole = [(source, d) for d in range(rank)]
        if node.target == "size":
            dim = args[1] if len(args) > 1 else node.kwargs.get("dim")
            return whole if dim is None else whole[dim] if isinstance(dim, int) else None
        if node.target is getattr and args[1] == "shape":
            return whole
        if node.target is len and rank:
            return whole[0]
    if node.target is operator.getitem and isinstance(g.dims.get(source), list):
        if isinstance(args[1], (int, slice)):
            return g.dims[source][args[1]]
    return None


def _convert_call(g: TorchGraph, node: Any) -> None:
    value = g.values[node]
    tensor_inputs = [a for a in node.all_input_nodes if a in g.blobs]
    if not _has_tensor(g.torch, value):
        if node.op == "call_method" and node.target in _DATA_DEPENDENT:
            g.problems.append(Problem(node.name, target_name(node, g.gm), "reads tensor data"))
            return
        g.folded[node] = value
        dims = _provenance(g, node)
        if dims is not None:
            g.dims[node] = dims
        return
    if not tensor_inputs and isinstance(value, g.torch.Tensor) and node.op != "call_module":
        g.blobs[node] = g.const(value, node.name)  # torch.arange(T), torch.ones(...)
        return
    converter = lookup(g, node)
    try:
        if converter is None:
            raise UnsupportedConversion("no converter")
        converter(g, node)
    except UnsupportedConversion as e:
        g.problems.append(Problem(node.name, target_name(node, g.gm), str(e)))
    if node not in g.blobs:  # keep going, so every problem is reported at once
        n = len(value) if isinstance(value, (list, tuple)) else 0
        g.blobs[node] = [f"{node.name}_{i}" for i in range(n)] if n else node.name


def _outputs(g: TorchGraph, node: Any) -> list[str]:
    out: list[str] = []

    def collect(arg):
        if g.is_node(arg):
            blob = g.blobs.get(arg)
            if blob is None:
                raise UnsupportedConversion(
                    f"from_torch: output {arg.name!r} is a Python value "
                    f"({g.value(arg)!r}), not a tensor"
                )
            out.extend(blob if isinstance(blob, list) else [blob])
        elif isinstance(arg, (list, tuple)):
            for a in arg:
                collect(a)
        elif isinstance(arg, dict):
            for a in arg.values():
                collect(a)
        elif arg is not None:
            raise UnsupportedConversion(f"from_torch: output {arg!r} is not a tensor")

    collect(node.args[0])
    return out


def _walk(g: TorchGraph) -> list[str]:
    """Converts every node in order; returns the output blobs."""
    outputs: list[str] = []
    for node in g.gm.graph.nodes:
        if node.op == "get_attr":
            value = g.values[node]
            if not isinstance(value, g.torch.Tensor):
                g.folded[node] = value
            else:
                key = g.state_key(node.target)
                g.blobs[node] = key if key in g.params else g.const(value, node.name)
        elif node.op == "output":
            outputs = _outputs(g, node)
        elif node.op != "placeholder":
            _convert_call(g, node)
    return outputs


def _report(problems: list[Problem]) -> UnsupportedConversion:
    by_target: dict[str, list[Problem]] = defaultdict(list)
    for p in problems:
        by_target[p.target].append(p)
    lines = [f"from_torch: {len(problems)} call(s) cannot be converted:"]
    for target, items in by_target.items():
        reasons = sorted({p.reason for p in items})
        nodes = ", ".join(p.node for p in items)
        lines.append(f"  {target} x{len(items)} ({'; '.join(reasons)}): nodes {nodes}")
    return UnsupportedConversion("\n".join(lines))


# -- the init net ------------------------------------------------------------------------


def _netdef_of(module: Any, input_names: Sequence[str] | None) -> tuple[NetDef, NetDef]:
    """A module to_torch built, back as its NetDef, with the module's current weights
    (its state_dict keys are the blob names): tracing its generic forward would lose the
    net's ops and names."""
    if input_names is not None and list(input_names) != list(module.input_names):
        raise ValueError(
            f"from_torch: this module computes a NetDef whose inputs are "
            f"{module.input_names}; input_names {list(input_names)} would rename them"
        )
    init = NetDef(name=f"{module.net_name}_init")
    for name, value in module.state_dict().items():
        add_fill(init, name, to_numpy(value))
    predict = NetDef()
    predict.CopyFrom(module._predict_net)
    return init, predict


def add_fill(init: NetDef, name: str, array: np.ndarray) -> None:
    """Appends an op filling blob `name` with exactly `array` (brew's add_given_fill)."""
    add_given_fill(init, name, array)


def _value_info(net: NetDef, name: str, array: np.ndarray) -> None:
    info = net.value_info.add(name=name, data_type=data_type_of(array.dtype))
    info.dims.extend(array.shape)


# -- the entry point ---------------------------------------------------------------------


def from_torch(
    torch_module: Any, example_inputs: Any, *, input_names: Sequence[str] | None = None
) -> tuple[NetDef, NetDef]:
    """Converts a torch.nn.Module into (init_net, predict_net).

    Args:
        torch_module: the module, in eval mode where it has BatchNorm or Dropout.
        example_inputs: a tensor or a tuple of tensors, one per forward argument.
        input_names: blob names for the inputs (default: the forward's argument names).

    Returns:
        init_net filling every state_dict entry under its key, and predict_net whose
        external inputs are the inputs then those keys, and whose external outputs are
        the forward's output tensors (flattened from tuples, lists and dicts).

    Raises:
        ImportError: torch is not installed.
        UnsupportedConversion: calls that cannot be converted, all of them in one message
            (node name, target and count), or modules in training mode.
    """
    torch = import_torch()
    if isinstance(getattr(torch_module, "_predict_net", None), NetDef):
        return _netdef_of(torch_module, input_names)
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else example_inputs
    gm = _trace(torch, torch_module, len(inputs))
    values = _record(torch, gm, tuple(inputs))
    state = torch_module.state_dict()
    g = TorchGraph(torch, gm, values, list(state), type(torch_module).__name__.lower())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    names = list(input_names) if input_names is not None else [n.name for n in placeholders]
    if len(names) != len(placeholders) or len(inputs) != len(placeholders):
        raise ValueError(
            f"from_torch: forward takes {len(placeholders)} inputs "
            f"({', '.join(n.name for n in placeholders)}), got {len(inputs)} example inputs "
            f"and {len(names)} names"
        )
    clash = sorted(set(names) & g.params)
    if clash or len(set(names)) != len(names):
        raise ValueError(f"from_torch: input names must be unique and not state_dict keys: {names}")
    g.taken.update(names)
    for node, name in zip(placeholders, names):
        g.blobs[node] = name
    outputs = _walk(g)
    if g.problems:
        raise _report(g.problems)
    return _nets(g, names, [to_numpy(t) for t in inputs], state, outputs)


def _nets(g: TorchGraph, names, inputs, state, outputs) -> tuple[NetDef, NetDef]:
    init = NetDef(name=f"{g.net.name}_init")
    for key, tensor in state.items():
        add_fill(init, key, to_numpy(tensor))
    predict = g.net.proto()
    predict.external_input.extend([*names, *state])
    predict.external_output.extend(outputs)
    for name, array in zip(names, inputs):
        _value_info(predict, name, array)
    return init, predict
