"""netbrew.nn Module -> (init_net, predict_net) by tracing, like torch.jit.trace.

`trace(module, example_inputs)` runs the module once on the example inputs with a tracer
active. Every op the module issues through netbrew.nn (layers, `netbrew.nn.functional`,
arithmetic and methods of the values it receives) is computed on the example, as in eager
mode, and recorded as an OperatorDef:

    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> init_net, predict_net = trace(model, np.ones((2, 4), np.float32))
    >>> print(format_net(predict_net))
    net Sequential(input, 0.weight, 0.bias, 2.weight, 2.bias) -> (output)
      0 = Gemm(input, 0.weight, 0.bias, transB=1)
      1 = Relu(0)
      output = Gemm(1, 2.weight, 2.bias, transB=1)

Names: parameters and buffers are blobs named by their state_dict keys
(`layer1.0.conv1.weight`, `bn.running_mean`); an op's outputs are named after the module
that issued it (`layer1.0.conv1`, then `layer1.0.conv1_1`...), or after the op type at the
top level. Inputs take the names of forward's parameters unless `input_names` is given.

The nets: `init_net` fills every parameter and buffer (GivenTensor*Fill with the module's
current values, in state_dict order), then the constants the ops read. `predict_net`
lists the inputs, the parameters and buffers, then the constants as external inputs, and
the outputs as external outputs.

Modes: the module is traced in its current mode. In training, BatchNorm records
BatchNormalization with training_mode=1 and writes its running statistics and
num_batches_tracked back to their blobs (so each run of the net updates them as an eager
training step does), and Dropout records a training Dropout (ratio and training_mode
inputs, a mask output for its gradient, and a `seed` drawn from netbrew.nn's random
stream, so nets traced after `nn.manual_seed(s)` drop the same elements run after run).
After `module.eval()`, BatchNorm uses the running statistics and Dropout is recorded in
inference mode (the identity). Tracing never changes the module: its parameters and
buffers keep their values.

What tracing freezes (as torch.jit.trace does):
    - Python control flow. Only the ops that ran are recorded, so `if x.sum() > 0:`
      keeps the branch the example took, whatever the input of a later run.
    - Conversions to Python values. `bool(v)`, `float(v)`, `int(v)`, `v.item()` and
      `v.tolist()` on a traced value return the example's value, record nothing and warn
      with TracerWarning; anything computed from that number is a constant of the net.
      Ops whose only use was such a conversion are dropped from the net.
    - Shapes. `x.shape` is the example's shape; Flatten and the leading dims of a
      flatten keep the batch size free, but a reshape to `x.shape[0]` bakes it.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import Net
from netbrew.netdef.passes.dead_code import eliminate_dead_code
from netbrew.nn._dispatch import reset_tracer, set_tracer
from netbrew.nn._tracer import TracedValue, Tracer, TracerWarning, TracingError
from netbrew.nn.module import Module
from netbrew.operators import get_schema
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef
from netbrew.script.nets import build_nets, deep_reads, subnets

__all__ = ["TracerWarning", "TracingError", "to_model_helper", "trace"]


def trace(
    module: Module,
    example_inputs: Any,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple[NetDef, NetDef]:
    """Records `module(*example_inputs)` as a NetDef pair.

    Args:
        module: a netbrew.nn Module, in the mode (train or eval) to record.
        example_inputs: one array, or a tuple or list of arrays (one per forward argument).
        input_names: blob names of the inputs; default: forward's parameter names.
        output_names: blob names of the outputs; default: "output" for one, else
            "output_0", "output_1", ...

    Returns:
        (init_net, predict_net). Running init_net, then predict_net fed with the inputs,
        gives the module's outputs for them (see the module docstring for what is frozen).

    Raises:
        TracingError: forward returned something other than values, tuples or lists of
            them, or used state the trace cannot name; ValueError for bad names.
    """
    if not isinstance(module, Module):
        raise TypeError(f"trace expects a netbrew.nn.Module, got {type(module).__name__}")
    arrays = _example_arrays(example_inputs)
    names = list(input_names) if input_names is not None else _input_names(module, len(arrays))
    if len(names) != len(arrays):
        raise ValueError(f"got {len(names)} input names for {len(arrays)} example inputs")
    _check_unique([*names, *(output_names or [])])
    tracer = Tracer(module, reserved=[*names, *(output_names or [])])
    values = [tracer.add_input(n, a) for n, a in zip(names, arrays)]
    token = set_tracer(tracer)
    try:
        result = module(*values)
    finally:
        reset_tracer(token)
    outputs = [tracer.as_value(v) for v in _flatten_outputs(result)]
    if output_names is None:
        default = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
        output_names = [tracer.fresh(n) for n in default]
    elif len(output_names) != len(outputs):
        raise ValueError(f"got {len(output_names)} output names for {len(outputs)} outputs")
    ops = _finish(tracer, outputs, list(output_names))
    name = type(module).__name__
    return build_nets(name, tracer, names, ops, list(output_names), module.state_dict())


def _example_arrays(example_inputs: Any) -> list[np.ndarray]:
    items = list(example_inputs) if isinstance(example_inputs, (tuple, list)) else [example_inputs]
    arrays = []
    for i, item in enumerate(items):
        if not isinstance(item, (np.ndarray, np.generic)):
            raise TypeError(
                f"example input {i} is a {type(item).__name__}; trace takes NumPy arrays"
            )
        arrays.append(np.asarray(item))
    return arrays


def _input_names(module: Module, n: int) -> list[str]:
    """forward's positional parameter names, then input_{i} for the rest."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        params = []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in params if p.kind in kinds][:n]
    return names + [f"input_{i}" for i in range(len(names), n)]


def _check_unique(names: list[str]) -> None:
    seen = set()
    for name in names:
        if not name or not isinstance(name, str):
            raise ValueError(f"blob names must be non-empty strings, got {name!r}")
        if name in seen:
            raise ValueError(f"name {name!r} is given twice in input_names/output_names")
        seen.add(name)


def _flatten_outputs(result: Any) -> list[Any]:
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    for i, item in enumerate(items):
        if not isinstance(item, (TracedValue, np.ndarray, np.generic, int, float, bool)):
            raise TracingError(
                f"forward returned a {type(item).__name__} as output {i}; trace records "
                "arrays, or a tuple or list of arrays"
            )
    return items


# -- from recorded ops to the predict net's op list ---------------------------------------------


def _producers(ops: list[OperatorDef]) -> dict[str, int]:
    return {b: i for i, op in enumerate(ops) for b in op.output if b}


def _rename(ops: list[OperatorDef], start: int, old: str, new: str) -> None:
    for op in ops[start:]:
        for field in (op.input, op.output):
            for i, blob in enumerate(field):
                if blob == old:
                    field[i] = new


def _can_take_name(ops: list[OperatorDef], index: int, src: str, dst: str) -> bool:
    """Whether op `index` may write `dst` instead of `src`: no later op touches dst, and
    where the op reads dst itself the schema allows that slot in place."""
    op = ops[index]
    slot = list(op.output).index(src)
    inplace = get_schema(op.type).inplace
    if any(b == dst and inplace.get(i) != slot for i, b in enumerate(op.input)):
        return False
    return not any(dst in later.input or dst in later.output for later in ops[index + 1 :])


def _finish(tracer: Tracer, outputs: list[TracedValue], output_names: list[str]) -> list:
    """Writes updated buffers back to their blobs and names the outputs, each by renaming
    the op that produced the value where that is safe, else with an Identity; then drops
    the ops nothing needed reads."""
    ops = list(tracer.ops)
    alias: dict[str, str] = {}
    fixed = set(tracer.state) | set(tracer.inputs) | set(tracer.constants)
    fixed |= {b for op in ops for net in subnets(op) for b in deep_reads(net.op)}

    def settle(src: str, dst: str) -> None:
        while src in alias:
            src = alias[src]
        if src == dst:
            return
        index = _producers(ops).get(src)
        if index is not None and src not in fixed and _can_take_name(ops, index, src, dst):
            _rename(ops, index, src, dst)
            alias[src] = dst
        else:
            ops.append(OperatorDef(type="Identity", input=[src], output=[dst]))
        fixed.add(dst)

    for blob, src in tracer.updates.items():
        settle(src, blob)
    for value, name in zip(outputs, output_names):
        settle(value.name, name)
    live = NetDef(external_output=[*output_names, *tracer.updates])
    live.op.extend(ops)
    return list(eliminate_dead_code(live).op)


def to_model_helper(module: Module, init_net: NetDef, predict_net: NetDef) -> ModelHelper:
    """A ModelHelper over traced nets, for brew's training tools (losses, gradients,
    optimizers, save_model).

    Parameters are tagged WEIGHT (BIAS for names ending in "bias"), or COMPUTED when
    `requires_grad` is False; buffers are COMPUTED; the other init-net blobs (constants)
    are the model's constants.

    Example:
        >>> init_net, predict_net = trace(model.train(), x)
        >>> helper = to_model_helper(model, init_net, predict_net)
        >>> loss = helper.net.SoftmaxWithLoss(["output", "label"], ["prob", "loss"])[1]
        >>> helper.add_gradient_operators([loss])
        >>> brew.optimizer.build_sgd(helper, 0.1, momentum=0.9)
    """
    model = ModelHelper(name=predict_net.name)
    model.net = Net(predict_net)
    model.param_init_net = Net(init_net)
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    for op in init_net.op:
        blob = op.output[0]
        if blob in params:
            p = params[blob]
            tag = Tags.BIAS if blob.endswith("bias") else Tags.WEIGHT
            tag = tag if p.requires_grad else Tags.COMPUTED
            shape = p.shape
        elif blob in buffers:
            tag, shape = Tags.COMPUTED, buffers[blob].shape
        else:
            model.constants.append(blob)
            continue
        model.add_param(blob, shape, tag)
    return model
