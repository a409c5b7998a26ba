"""Channel-shuffle folding: a Conv (or ConvRelu) whose output only a channel shuffle reads,
Reshape (N, G, M/G, *S) -> Transpose(perm=[0, 2, 1, ...]) -> Reshape (N, M, *S), becomes
one ConvShuffle (netbrew.operators.conv_shuffle), which writes the shuffled channels
directly."""

from __future__ import annotations

import numpy as np

from netbrew.netdef.args import args_dict, make_arg
from netbrew.netdef.passes._graph import can_write_early, copy_net, readers, sole_reader
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

_BASES = {"Conv": 0, "ConvRelu": 1}
"""Op type -> the `relu` attribute of its ConvShuffle."""


def fold_channel_shuffle(net: NetDef, params: dict) -> NetDef:
    """Rewrites `y = Conv(x, w, b); r = Reshape(y, s1); t = Transpose(r, perm=[0, 2, 1,
    ...]); z = Reshape(t, s2)` as `z = ConvShuffle(x, w, b, grouped_shape=s1, shape=s2)`
    (ConvRelu likewise, with relu=1).

    The chain folds when the conv runs on CPU, each of y, r and t has that one reader and
    is not a net output, both shapes are 1-D integer params that no op writes, both Reshapes
    have allowzero=0, and no op between the conv and the last Reshape touches z. ConvShuffle
    checks at run time that s1 and s2 shuffle the conv's output; other shapes still give
    the three ops' results. An inference pass, though ConvShuffle differentiates as the
    four ops did (fused_grad).

    Args:
        net: the NetDef; not modified.
        params: parameter values by name (the Reshapes' shape inputs among them).

    Returns:
        A new NetDef.
    """
    used, live_out = readers(net)
    written = {name for op in net.op for name in op.output}
    folded: dict[int, OperatorDef] = {}
    dropped: set[int] = set()
    for i, op in enumerate(net.op):
        if op.type not in _BASES or op.device_option.device_type != 0:
            continue
        chain = _shuffle_chain(net, used, live_out, i)
        if chain is None:
            continue
        j, k, last = chain
        shapes = [_constant_shape(net.op[n], params, written) for n in (j, last)]
        if any(s is None for s in shapes):
            continue
        rank = len(shapes[0])
        perm = args_dict(net.op[k].arg).get("perm")
        if perm is None or list(perm) != [0, 2, 1, *range(3, rank)]:
            continue
        if not can_write_early(net, i, last, net.op[last].output[0]):
            continue
        new = OperatorDef()
        new.CopyFrom(op)
        new.type = "ConvShuffle"
        new.output[0] = net.op[last].output[0]
        new.arg.extend(
            [
                make_arg("grouped_shape", shapes[0]),
                make_arg("shape", shapes[1]),
                make_arg("relu", _BASES[op.type]),
            ]
        )
        folded[i] = new
        dropped.update(chain)
    ops = [folded.get(i, op) for i, op in enumerate(net.op) if i not in dropped]
    return copy_net(net, ops)


def _shuffle_chain(net: NetDef, used, live_out, i: int) -> tuple[int, int, int] | None:
    """The indices of the Reshape, Transpose and Reshape that read op i's output one after
    the other, each the sole reader of the one before; None if that chain is not there."""
    chain, at = [], i
    for kind in ("Reshape", "Transpose", "Reshape"):
        nxt = sole_reader(net, used, live_out, at)
        if nxt is None:
            return None
        op = net.op[nxt]
        if op.type != kind or op.input[0] != net.op[at].output[0] or op.control_input:
            return None
        if op.input[1:].count(net.op[at].output[0]):  # the shape is not the data
            return None
        chain.append(nxt)
        at = nxt
    return chain[0], chain[1], chain[2]


def _constant_shape(op: OperatorDef, params: dict, written: set[str]) -> list[int] | None:
    """A Reshape's shape input as a list of ints, when it is a param no op writes and the
    op has allowzero=0; else None."""
    if len(op.input) != 2 or op.input[1] in written or op.input[1] not in params:
        return None
    if args_dict(op.arg).get("allowzero", 0):
        return None
    shape = np.asarray(params[op.input[1]])
    if shape.ndim != 1 or shape.dtype.kind not in "iu":
        return None
    return [int(d) for d in shape]
