"""From the ops a script recorded to the NetDef pair: output names, dead code, init net."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.brew.initializers import add_given_fill
from netbrew.netdef.net import Net
from netbrew.netdef.passes._graph import subnets
from netbrew.netdef.passes.dead_code import eliminate_dead_code
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def deep_reads(ops: Any) -> set[str]:
    """Every blob the ops read, including what their subnets read (outer-scope reads)."""
    names: set[str] = set()
    for op in ops:
        names.update(b for b in op.input if b)
        for net in subnets(op):
            names |= deep_reads(net.op)
    return names


def finish(tracer: Any, outputs: list[Any], output_names: list[str]) -> list[OperatorDef]:
    """Names the outputs (renaming the top-level op that wrote a value, where nothing else
    refers to it, else with an Identity) and drops dead ops."""
    ops = list(tracer.ops)
    fixed = set(tracer.state) | set(tracer.inputs) | set(tracer.constants)
    inner = {b for op in ops for net in subnets(op) for b in deep_reads(net.op)}
    producers = {b: i for i, op in enumerate(ops) for b in op.output if b}
    renamed: set[str] = set()
    for value, name in zip(outputs, output_names):
        src = value.name
        if src in producers and src not in fixed | inner | renamed:
            for op in ops:
                for field in (op.input, op.output):
                    for i, blob in enumerate(field):
                        if blob == src:
                            field[i] = name
            renamed.add(src)
            fixed.add(name)
        else:
            ops.append(OperatorDef(type="Identity", input=[src], output=[name]))
    for blob, src in tracer.updates.items():  # running statistics written back, as eagerly
        ops.append(OperatorDef(type="Identity", input=[src], output=[blob]))
    live = NetDef(external_output=[*output_names, *tracer.updates])
    live.op.extend(ops)
    return list(eliminate_dead_code(live).op)


def build_nets(
    name: str,
    tracer: Any,
    input_names: list[str],
    ops: list,
    output_names: list[str],
    state_order: Any = (),
) -> tuple[NetDef, NetDef]:
    """(init_net, predict_net): the init net fills the module's state and the constants
    that any op (or subnet) reads. State blobs named in `state_order` (a module's
    state_dict keys, for trace) come first, in that order."""
    first = [k for k in state_order if k in tracer.state_arrays]
    state = list(dict.fromkeys([*first, *tracer.state_arrays]))
    read = deep_reads(ops)
    constants = [c for c in tracer.constants if c in read]
    init = Net(f"{name}_init")
    for blob in state:
        add_given_fill(init, blob, np.asarray(tracer.state_arrays[blob]))
    for blob in constants:
        add_given_fill(init, blob, tracer.constants[blob])
    predict = NetDef(name=name)
    predict.op.extend(ops)
    predict.external_input.extend([*input_names, *state, *constants])
    predict.external_output.extend(output_names)
    return init.proto(), predict
