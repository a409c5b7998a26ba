"""The translator registry and the context translators build canonical ops with."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from netbrew.netdef.args import args_dict
from netbrew.netdef.net import op_def
from netbrew.operators.registry import Registry
from netbrew.proto.netbrew_pb2 import OperatorDef

# Arguments that choose an implementation in Caffe2 and do not change results.
HARMLESS = frozenset(
    {
        "use_cudnn", "cudnn_exhaustive_search", "exhaustive_search", "ws_nbytes_limit",
        "engine", "shared_buffer", "float16_compute", "deterministic", "use_mkldnn",
        "training_mode_legacy", "num_threads", "is_test_legacy", "run_once",
    }
)  # fmt: skip

IGNORED = HARMLESS | {"order"}
"""Arguments every translator accepts and drops: the tuning-only HARMLESS ones, and
`order`, which Caffe2's ModelHelper writes onto every helper op (Relu, Sum, FC, Softmax,
Dropout, AveragedLoss...) through its arg_scope. Ops that have a layout (Conv, the pools,
SpatialBN, LRN, Concat, ChannelShuffle) read `order` themselves, through
`ops_window.nhwc`, before this set is consulted; on every other op it means nothing.
translate_net also strips these names from the ops translators emit (fillers are
copied as they are, and netbrew's kernels reject arguments they do not know)."""

Translator = Callable[[OperatorDef, "Context"], list[OperatorDef]]
TRANSLATORS: Registry[str, Translator] = Registry("Caffe2 op translator")
REFUSED: dict[str, str] = {}


def translator(*op_types: str) -> Callable[[Translator], Translator]:
    """Registers a translator for Caffe2 op types."""

    def register(fn: Translator) -> Translator:
        for op_type in op_types:
            TRANSLATORS.add(op_type, fn)
        return fn

    return register


def refuse(reason: str, *op_types: str) -> None:
    """Declares Caffe2 ops netbrew will not load, with the reason."""
    for op_type in op_types:
        REFUSED[op_type] = reason


class Context:
    """Helps a translator: parsed args with use tracking, constants and scratch names."""

    def __init__(self, op: OperatorDef) -> None:
        self.op = op
        self.args = args_dict(op.arg)
        self.used: set[str] = set()
        self.counter = 0

    def arg(self, *names: str, default: Any = None) -> Any:
        """The first of `names` that is set (marked used), else `default`."""
        self.used.update(names)
        for name in names:
            if name in self.args:
                return self.args[name]
        return default

    def has(self, *names: str) -> bool:
        return any(n in self.args for n in names)

    def unused(self) -> list[str]:
        """Arguments of the legacy op no translator step read (IGNORED ones excepted)."""
        return [n for n in self.args if n not in self.used and n not in IGNORED]

    def name(self, tag: str) -> str:
        """A fresh scratch blob name derived from the op's first output."""
        self.counter += 1
        return f"{self.op.output[0]}__{tag}{self.counter}"

    def make(
        self, op_type: str, inputs: Iterable[str], outputs: Iterable[str], **args
    ) -> OperatorDef:
        """A canonical op carrying the legacy op's name and device."""
        out = op_def(op_type, list(inputs), list(outputs), **args)
        if self.op.name:
            out.name = self.op.name
        if self.op.HasField("device_option"):
            out.device_option.CopyFrom(self.op.device_option)
        return out

    def const(self, value: Any, dtype: Any = np.int64) -> tuple[str, OperatorDef]:
        """A Constant op holding `value`; returns its blob name and the op."""
        blob = self.name("const")
        return blob, self.make("Constant", [], [blob], value=np.asarray(value, dtype=dtype))
