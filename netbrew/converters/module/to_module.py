"""(init_net, predict_net) -> a netbrew.nn Module, the netbrew twin of to_torch.

    >>> module = to_module(init_net, predict_net)   # brew's LeNet
    >>> print(module)
    NetModule(
      net='lenet', inputs=[data], outputs=[softmax]
      (conv1): Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
      ...
      (fc4): Linear(in_features=64, out_features=10, bias=True)
    )
    >>> module(x)                       # eager, on NumPy arrays
    >>> trace(module, x)                # back to an equivalent NetDef, same blob names

The layer plan is plan.py's, shared with to_torch; this backend builds netbrew.nn layers
(Conv1d/Conv2d, ConvTranspose2d, Linear, BatchNorm1d/2d, LayerNorm, Embedding; ops whose
layer netbrew.nn lacks stay functional), and runs every other op through netbrew.nn's
dispatch point, so the module computes with the very kernels the NetDef runs, and tracing
it records them again.

Caffe2-style names (`conv1_w` in a Conv2d at `conv1`) are the names this module shows
everywhere: state_dict, load_state_dict, named_parameters and named_buffers map
`conv1.weight` <-> `conv1_w`, so `trace` writes the original blob names back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from netbrew import nn
from netbrew.converters.module.plan import Plan, Step, build_plan
from netbrew.converters.module.plan_module import Backend, PlanForward, layer_runner
from netbrew.executor.compiled import compile_op
from netbrew.netdef.args import args_dict
from netbrew.netdef.passes._graph import is_opaque
from netbrew.nn._dispatch import call


def to_module(init_net: Any, predict_net: Any) -> NetModule:
    """Builds a netbrew.nn Module computing `predict_net` with the parameters of `init_net`.

    Args:
        init_net: fills the parameters (a Net or NetDef; None when there are none).
        predict_net: the forward net (a Net or NetDef).

    Returns:
        A NetModule in eval mode whose forward takes the net's inputs positionally and
        returns its output (a tuple when there are several); its state_dict keys are
        exactly the blobs the init net fills.
    """
    plan = build_plan(
        init_net,
        predict_net,
        reserved=PlanForward.reserved(nn.Module()),
        available=lambda name: hasattr(nn, name),
    )
    return NetModule(plan).eval()


_BACKEND = Backend(
    nn=nn,
    array=lambda value: np.array(value, copy=True),
    is_float=lambda value: value.dtype.kind == "f",
    parameter=lambda value: nn.Parameter(value, dtype=value.dtype),
)


def _flatten(value: Any, axis: int) -> Any:
    return call("Flatten", [value], axis=axis)


def _op_runner(index: int, step: Step):
    op_type, args = step.op.type, args_dict(step.op.arg)
    count = len(step.outputs)
    if step.captured or is_opaque(step.op):  # If, Loop, Save... read blobs by name
        return _scope_runner(index, step)

    def run_op(root: NetModule, env: dict) -> None:
        inputs = [env[i] if i else None for i in step.inputs]
        results = call(op_type, inputs, outputs=count, **args)
        results = (results,) if count == 1 else results
        for name, value in zip(step.outputs, results):
            if name:
                env[name] = value

    return run_op


def _scope_runner(index: int, step: Step):
    """An op that reads blobs by name (If and Loop, whose bodies read outer blobs): run
    as the executor runs it, on the blobs it names. Eager only: tracing the module
    records no such op."""
    compiled = compile_op(index, step.op)
    names = [*step.inputs, *step.captured]

    def run_op(root: NetModule, env: dict) -> None:
        blobs = {name: env[name] for name in names if name}
        if any(not isinstance(v, np.ndarray) for v in blobs.values()):
            raise TypeError(f"{compiled.where}: runs eagerly only; it cannot be traced")
        compiled.run(blobs)
        for name in step.outputs:
            if name:
                env[name] = blobs[name]

    return run_op


class NetModule(PlanForward, nn.Module):
    """A NetDef as a netbrew.nn Module (see netbrew.converters.module.to_module)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self._setup(plan, _BACKEND)
        self._steps = [
            layer_runner(s, _flatten) if s.layer else _op_runner(i, s)
            for i, s in enumerate(plan.steps)
        ]
        self._renames = dict(plan.renames)  # module path -> blob name
        self._inverse = {blob: key for key, blob in plan.renames.items()}

    # -- blob names as the names of the state ------------------------------------------------

    def _blob(self, name: str, prefix: str) -> str:
        local = name[len(prefix) :] if name.startswith(prefix) else None
        return prefix + self._renames[local] if local in self._renames else name

    def state_dict(self, prefix: str = "") -> OrderedDict[str, np.ndarray]:
        """Parameters and buffers under their blob names."""
        state = super().state_dict(prefix=prefix)
        return OrderedDict((self._blob(k, prefix), v) for k, v in state.items())

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        for name, value in super().named_parameters(prefix, recurse, remove_duplicate):
            yield self._blob(name, f"{prefix}." if prefix else ""), value

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, np.ndarray]]:
        for name, value in super().named_buffers(prefix, recurse, remove_duplicate):
            yield self._blob(name, f"{prefix}." if prefix else ""), value

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True):
        """Reads blob names; missing and unexpected keys are reported as blob names."""
        renamed = {self._inverse.get(k, k): v for k, v in state_dict.items()}
        try:
            result = super().load_state_dict(renamed, strict=strict)
        except nn.StateDictError as e:
            message = str(e)
            for key, blob in self._renames.items():
                message = message.replace(f"'{key}'", f"'{blob}'")
            raise nn.StateDictError(message) from None
        return nn.IncompatibleKeys(
            [self._renames.get(k, k) for k in result.missing_keys],
            [self._renames.get(k, k) for k in result.unexpected_keys],
        )
