"""Activation fusion: Conv, Gemm or FC followed by its only reader Relu becomes one op;
a Conv followed by a residual Add and/or a Relu or Clip becomes one FusedConv."""

from __future__ import annotations

import numpy as np

from netbrew.netdef.args import args_dict, make_arg
from netbrew.netdef.passes._graph import can_write_early, copy_net, readers, sole_reader
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def fuse_activation(net: NetDef) -> NetDef:
    """Rewrites `y = Conv(x, w, b); z = Relu(y)` as `z = ConvRelu(x, w, b)` (Gemm, FC and an
    inference BatchNormalization with one output too).

    The pair fuses when the Relu is the only reader of the base op's output, that output
    is not a net output, and no op between them touches the Relu's output name. The fused
    ops (netbrew.operators.fused) differentiate as the pair did (fused_grad), though the
    pass is meant for inference.

    Args:
        net: the NetDef; not modified.

    Returns:
        A new NetDef.
    """
    from netbrew.operators.fused import FUSED_RELU  # late: operators import netdef

    used, live_out = readers(net)
    fused: dict[int, OperatorDef] = {}
    dropped: set[int] = set()
    for i, op in enumerate(net.op):
        if op.type not in FUSED_RELU or op.device_option.device_type != 0:  # CPU kernels only
            continue
        if op.type == "BatchNormalization" and (
            any(op.output[1:]) or args_dict(op.arg).get("training_mode", 0)
        ):
            continue  # a training BN's statistics outputs
        j = sole_reader(net, used, live_out, i)
        if j is None:
            continue
        relu = net.op[j]
        if relu.type != "Relu" or list(relu.input) != [op.output[0]] or relu.control_input:
            continue
        if not can_write_early(net, i, j, relu.output[0]):
            continue
        new = OperatorDef()
        new.CopyFrom(op)
        new.type = FUSED_RELU[op.type]
        new.output[0] = relu.output[0]
        fused[i] = new
        dropped.add(j)
    ops = [fused.get(i, op) for i, op in enumerate(net.op) if i not in dropped]
    return copy_net(net, ops)


def fuse_conv_epilogue(net: NetDef, params: dict | None = None) -> NetDef:
    """Rewrites a Conv followed by a residual Add and/or a Relu or Clip as one FusedConv
    (netbrew.operators.fused): `y = Conv(x, w, b); s = Add(y, z); r = Relu(s)` becomes
    `r = FusedConv(x, w, b, z, activation="Relu")`, as in ResNet's blocks; `Conv, Clip`
    (MobileNetV2's Relu6) becomes `FusedConv(x, w, b, "", min, max, activation="Clip")`;
    `Conv, Add` and `Conv, Add, Clip` likewise, and a Sum of two inputs as an Add. A lone
    `Conv, Relu` is left to fuse_activation (ConvRelu, which the Winograd and
    channel-shuffle passes build on).

    Each step fuses when it is the only reader of the step before, whose output is not a
    net output; the Add reads the conv's output once, as either input; a Clip's bounds are
    absent or params no op writes. The fused op runs where the last fused op ran, so it
    applies when no op in between writes the conv's inputs, nor the residual after the
    Add. CPU ops only. An inference pass, though FusedConv
    differentiates as the unfused ops did (fused_grad).

    Args:
        net: the NetDef; not modified.
        params: parameter values by name (Clip's bounds among them).

    Returns:
        A new NetDef.
    """
    params = params or {}
    used, live_out = readers(net)
    written = {name for op in net.op for name in op.output}
    fused: dict[int, OperatorDef] = {}
    dropped: set[int] = set()
    for i, op in enumerate(net.op):
        if op.type != "Conv" or op.device_option.device_type != 0 or i in dropped:
            continue
        chain = _epilogue_chain(net, used, live_out, i, params, written)
        if chain is None:
            continue
        residual, bounds, activation, steps = chain
        if any(k in dropped or k in fused for k in steps):  # another conv's Add already
            continue
        last = steps[-1]
        inputs = [*op.input, "", ""][:3]
        between = [set(net.op[k].output) for k in range(i + 1, last) if k not in steps]
        if any(set(inputs) & outs for outs in between):  # the conv's inputs must last
            continue
        if residual and any(residual in net.op[k].output for k in range(steps[0] + 1, last)):
            continue
        inputs += [residual, *bounds]
        new = OperatorDef()
        new.CopyFrom(op)
        new.type = "FusedConv"
        del new.input[:]
        new.input.extend(_trim(inputs))
        new.output[0] = net.op[last].output[0]
        new.arg.extend([make_arg("activation", activation)])
        fused[last] = new
        dropped.update([i, *steps[:-1]])
    ops = [fused.get(i, op) for i, op in enumerate(net.op) if i not in dropped]
    out = copy_net(net, ops)
    _mark_channels_last(out, params)
    return out


def _mark_channels_last(net: NetDef, params: dict) -> None:
    """Sets channels_last=1 on each ungrouped 2-D FusedConv without a residual whose output
    only depthwise convs (as their X) and 2-D MaxPools and AveragePools read, and is not a
    net output: those compute channels-last anyway (conv_last, pool_jit), so the output
    need not be turned back to C order and then again (the stems of MobileNetV2 and
    ShuffleNet). A ConvRelu so read becomes FusedConv(activation="Relu") to carry the
    mark. 1x1 convs follow their input's layout, and stride-1 3x3 ones are left to the
    Winograd pass."""
    from netbrew.operators.conv_winograd import plain_3x3  # late: operators import netdef

    used, live_out = readers(net)
    for i, op in enumerate(net.op):
        w = params.get(op.input[1]) if op.type in ("FusedConv", "ConvRelu") else None
        if w is None or np.ndim(w) != 4 or w.shape[2:] == (1, 1):
            continue
        args = args_dict(op.arg)
        if args.get("group", 1) != 1 or (len(op.input) > 3 and op.input[3]):
            continue
        if op.type == "ConvRelu" and plain_3x3(w.shape, args) or (i, 0) in live_out:
            continue
        reading = used.get((i, 0), [])
        if not reading or not all(
            _reads_channels_last(net.op[k], op.output[0], params) for k in reading
        ):
            continue
        if op.type == "ConvRelu":
            op.type = "FusedConv"
            op.arg.extend([make_arg("activation", "Relu")])
        op.arg.extend([make_arg("channels_last", 1)])


def _reads_channels_last(op: OperatorDef, blob: str, params: dict) -> bool:
    """Whether `op` computes channels-last from `blob`: a depthwise conv of it, or a 2-D
    MaxPool (without Indices) or AveragePool."""
    if op.type in ("MaxPool", "AveragePool"):
        kernel = args_dict(op.arg).get("kernel_shape", [])
        return list(op.input) == [blob] and len(op.output) == 1 and len(kernel) == 2
    return _depthwise_of(op, blob, params)


def _depthwise_of(op: OperatorDef, blob: str, params: dict) -> bool:
    """Whether `op` is a 2-D depthwise conv (multiplier 1) of `blob`, reading it as X only."""
    if op.type not in ("Conv", "FusedConv") or list(op.input).count(blob) != 1:
        return False
    w = params.get(op.input[1]) if len(op.input) > 1 else None
    group = args_dict(op.arg).get("group", 1)
    return (
        op.input[0] == blob
        and w is not None
        and np.ndim(w) == 4
        and w.shape[1] == 1
        and w.shape[0] == group > 1
    )


def _epilogue_chain(net: NetDef, used, live_out, i: int, params: dict, written: set[str]):
    """(residual, (min, max), activation, op indices) of the Add and/or Relu or Clip that
    read conv op i's output in turn; None when neither follows it, or only a Relu."""
    residual, bounds, activation, steps = "", ["", ""], "", []
    at = i
    nxt = sole_reader(net, used, live_out, at)
    if nxt is not None and net.op[nxt].type in ("Add", "Sum") and not net.op[nxt].control_input:
        add, y = net.op[nxt], net.op[i].output[0]
        if len(add.input) == 2 and list(add.input).count(y) == 1 and not args_dict(add.arg):
            residual = add.input[1] if add.input[0] == y else add.input[0]
            steps.append(nxt)
            at = nxt
            nxt = sole_reader(net, used, live_out, at)
    if nxt is not None and not net.op[nxt].control_input:
        act = net.op[nxt]
        if act.type == "Relu" and list(act.input) == [net.op[at].output[0]]:
            activation = "Relu"
        elif act.type == "Clip" and act.input[0] == net.op[at].output[0]:
            found = _clip_bounds(act, params, written)
            if found is not None:
                activation, bounds = "Clip", found
        if activation:
            steps.append(nxt)
    if not steps or (activation == "Relu" and not residual):
        return None
    return residual, bounds, activation, steps


def _clip_bounds(op: OperatorDef, params: dict, written: set[str]) -> list[str] | None:
    """A Clip's [min, max] input names ('' where absent) when each is a scalar param no op
    writes and the op has no attributes (opset-6 bounds); else None."""
    bounds = [*op.input[1:3], "", ""][:2]
    if args_dict(op.arg) or op.input[0] in op.input[1:]:
        return None
    for name in bounds:
        if name and (name in written or np.asarray(params.get(name, np.zeros(2))).size != 1):
            return None
    return bounds


def _trim(inputs: list[str]) -> list[str]:
    """Inputs without their trailing absent ('') optional ones."""
    while inputs and not inputs[-1]:
        inputs.pop()
    return inputs
