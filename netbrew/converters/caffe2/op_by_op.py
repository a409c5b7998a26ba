"""One Caffe2 op at a time, as netbrew.caffe2's `core.Net` adds ops for a script.

A file goes through translate_net whole; a script's net grows one op per call, and its
ops include netbrew's own (LabelCrossEntropy, Iter, LSTM...), which have no translator
because Caffe2 and netbrew spell them alike. They pass through with the arguments that
only tuned Caffe2's implementation dropped.
"""

from __future__ import annotations

from netbrew.converters.caffe2.context import HARMLESS, REFUSED, TRANSLATORS
from netbrew.converters.caffe2.translate import translate_net
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

# Dropped from ops that have no translator: Caffe2 accepted them on any op.
IGNORED = HARMLESS | {"run_once"}


def translate_op(op: OperatorDef) -> list[OperatorDef]:
    """The canonical ops for one op written in Caffe2's spellings.

    Raises:
        UnsupportedConversion: the op is refused or cannot be translated; the message
            names it and says why.
        UnknownOperatorError: neither Caffe2's translators nor netbrew know the op type.
    """
    from netbrew.operators import get_schema

    if op.type in TRANSLATORS or op.type in REFUSED:
        return list(translate_net(NetDef(name=op.type, op=[op]), where="Caffe2 op").op)
    schema = get_schema(op.type)  # UnknownOperatorError with near names
    # `order` on an op with no layout (Relu, Sum, FC) changed nothing in Caffe2 either.
    ignored = IGNORED if "order" in schema.attrs else IGNORED | {"order"}
    keep = [a for a in op.arg if a.name not in ignored]
    out = OperatorDef()
    out.CopyFrom(op)
    del out.arg[:]
    out.arg.extend(keep)
    return [out]
