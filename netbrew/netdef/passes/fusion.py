"""Activation fusion: Conv, Gemm or FC followed by its only reader Relu becomes one op."""

from __future__ import annotations

from netbrew.netdef.passes._graph import can_write_early, copy_net, readers, sole_reader
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def fuse_activation(net: NetDef) -> NetDef:
    """Rewrites `y = Conv(x, w, b); z = Relu(y)` as `z = ConvRelu(x, w, b)` (Gemm, FC too).

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
