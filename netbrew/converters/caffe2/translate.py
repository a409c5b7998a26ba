"""Legacy Caffe2 NetDef -> canonical NetDef, translated once, on load."""

from __future__ import annotations

import collections

from netbrew.converters.caffe2.context import IGNORED, REFUSED, TRANSLATORS, Context
from netbrew.errors import NetbrewError, UnsupportedConversion
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

CANONICAL_MARK = "netbrew_canonical"
"""A net argument that marks a NetDef already in canonical ops (written by `save`)."""


def is_canonical(net: NetDef) -> bool:
    return any(a.name == CANONICAL_MARK and a.i for a in net.arg)


def translate_net(net: NetDef, *, where: str = "net") -> NetDef:
    """Returns the canonical form of a Caffe2 NetDef; names are kept.

    Raises:
        UnsupportedConversion: one error listing every op that cannot be translated,
            with its count and reason.
    """
    if is_canonical(net):
        return net
    out = NetDef()
    out.CopyFrom(net)
    del out.op[:]
    problems: collections.Counter[str] = collections.Counter()
    for index, op in enumerate(net.op):
        if op.type in REFUSED:
            problems[f"{op.type}: {REFUSED[op.type]}"] += 1
            continue
        if op.type not in TRANSLATORS:
            problems[f"{op.type}: no translation to netbrew's ops"] += 1
            continue
        ctx = Context(op)
        try:
            ops = TRANSLATORS[op.type](op, ctx)
        except (NetbrewError, KeyError, TypeError, ValueError) as e:
            label = op.name or (op.output[0] if op.output else "")
            problems[f"{op.type} (op #{index} {label!r}): {e}"] += 1
            continue
        unused = ctx.unused()
        if unused:
            problems[f"{op.type}: argument(s) {', '.join(sorted(unused))} not supported"] += 1
            continue
        out.op.extend(_without_ignored(o) for o in ops)
    if problems:
        lines = "\n  ".join(f"{text} (x{count})" for text, count in problems.most_common())
        raise UnsupportedConversion(
            f"{where} {net.name or '<unnamed>'!r}: {sum(problems.values())} op(s) cannot be "
            f"loaded:\n  {lines}"
        )
    out.arg.add(name=CANONICAL_MARK, i=1)
    return out


def _without_ignored(op: OperatorDef) -> OperatorDef:
    """`op` less the IGNORED arguments: a translator that copies a legacy op (the
    fillers) would otherwise hand the kernels Caffe2's tuning flags."""
    if any(a.name in IGNORED for a in op.arg):
        keep = [a for a in op.arg if a.name not in IGNORED]
        del op.arg[:]
        op.arg.extend(keep)
    return op


LEGACY_ARGS = frozenset(
    {
        "kernel", "kernels", "kernel_h", "kernel_w", "stride", "stride_h", "stride_w",
        "pad", "pad_t", "pad_l", "pad_b", "pad_r", "order", "legacy_pad", "broadcast",
        "is_test", "global_pooling", "dims", "adj", "adjs", "use_cudnn",
        "cudnn_exhaustive_search", "ws_nbytes_limit", "exhaustive_search", "run_once",
    }
)  # fmt: skip
LEGACY_TYPES = frozenset({"SpatialBN", "FCTransposed", "ExpandDims", "ChannelShuffle", "Copy",
                          "DepthConcat", "MaxPool2D", "AveragePool2D", "ATen", "BatchMatMul",
                          "ScatterAssign", "CopyGPUToCPU", "CopyCPUToGPU"})  # fmt: skip
# Canonical ops of these types take axes (or starts/ends) as inputs, Caffe2's as arguments.
LEGACY_WHEN_ARG = {"axes": frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                      "Shape"}),
                   "starts": frozenset({"Slice"}), "ends": frozenset({"Slice"})}  # fmt: skip


def looks_legacy(net: NetDef) -> bool:
    """True for an unmarked net that uses a Caffe2-only spelling somewhere."""
    if is_canonical(net):
        return False
    for op in net.op:
        if op.type in LEGACY_TYPES or any(a.name in LEGACY_ARGS for a in op.arg):
            return True
        if any(op.type in LEGACY_WHEN_ARG.get(a.name, ()) for a in op.arg):
            return True
        if op.type == "Concat" and len(op.output) > 1:  # split_info
            return True
    return False
