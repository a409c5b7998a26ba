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
from netbrew.converters.module.plan import BUFFERS, Layer, Plan, Step, build_plan
from netbrew.netdef.args import args_dict
from netbrew.nn._dispatch import call
from netbrew.proto.netbrew_pb2 import NetDef


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
    taken = set(dir(nn.Module()))
    plan = build_plan(
        _netdef(init_net),
        _netdef(predict_net),
        reserved=taken.__contains__,
        available=lambda name: hasattr(nn, name),
    )
    return NetModule(plan).eval()


def _netdef(net: Any) -> NetDef | None:
    return net.proto() if hasattr(net, "proto") else net


def _set_state(module: nn.Module, name: str, value: np.ndarray, buffer: bool) -> None:
    value = np.array(value, copy=True)
    if buffer or value.dtype.kind != "f":
        if name in module._parameters:
            delattr(module, name)
        module.register_buffer(name, value)
    else:
        module.register_parameter(name, nn.Parameter(value, dtype=value.dtype))


def _make_layer(layer: Layer, params: dict[str, np.ndarray]) -> nn.Module:
    module = getattr(nn, layer.class_name)(**layer.config)
    for attr, blob in layer.params.items():
        _set_state(module, attr, params[blob], attr in BUFFERS)
    if "num_batches_tracked" in module._buffers and "num_batches_tracked" not in layer.params:
        module.num_batches_tracked = None  # the NetDef has none: keep it out of state_dict
    return module


def _build_tree(root: nn.Module, plan: Plan) -> None:
    """Containers, layers and other parameters, in the init net's order."""
    containers = set(plan.containers())
    made: set[str] = {""}
    for blob, value in plan.params.items():
        path, attr = plan.placement[blob]
        parts = path.split(".") if path else []
        for k in range(1, len(parts) + 1):
            sub = ".".join(parts[:k])
            if sub in containers and sub not in made:
                root.get_submodule(".".join(parts[: k - 1])).add_module(parts[k - 1], nn.Module())
                made.add(sub)
        layer = plan.layers.get(path)
        if layer is None or attr not in layer.params:
            _set_state(root.get_submodule(path), attr, value, False)
        elif path not in made:
            parent, _, name = path.rpartition(".")
            root.get_submodule(parent).add_module(name, _make_layer(layer, plan.params))
            made.add(path)


def _layer_runner(step: Step):
    path, x, out, axis = step.layer.path, step.inputs[0], step.outputs[0], step.flatten_axis

    def run_layer(root: NetModule, env: dict) -> None:
        value = env[x]
        if axis is not None:
            value = call("Flatten", [value], axis=axis)
        env[out] = root.get_submodule(path)(value)

    return run_layer


def _op_runner(step: Step):
    op_type, args = step.op.type, args_dict(step.op.arg)
    count = len(step.outputs)

    def run_op(root: NetModule, env: dict) -> None:
        inputs = [env[i] if i else None for i in step.inputs]
        results = call(op_type, inputs, outputs=count, **args)
        results = (results,) if count == 1 else results
        for name, value in zip(step.outputs, results):
            if name:
                env[name] = value

    return run_op


class NetModule(nn.Module):
    """A NetDef as a netbrew.nn Module (see netbrew.converters.module.to_module)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.net_name = plan.name
        self.input_names = list(plan.inputs)
        self.output_names = list(plan.outputs)
        _build_tree(self, plan)
        self._state_refs = [(blob, path, attr) for blob, (path, attr) in plan.placement.items()]
        self._steps = [_layer_runner(s) if s.layer else _op_runner(s) for s in plan.steps]
        self._renames = dict(plan.renames)  # module path -> blob name
        self._inverse = {blob: key for key, blob in plan.renames.items()}

    def get_submodule(self, target: str) -> nn.Module:
        module: nn.Module = self
        for name in target.split(".") if target else []:
            module = module._modules[name]
        return module

    def forward(self, *inputs: Any) -> Any:
        if len(inputs) != len(self.input_names):
            raise TypeError(
                f"{self.net_name}: forward takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(inputs)}"
            )
        env = dict(zip(self.input_names, inputs))
        for blob, path, attr in self._state_refs:
            env[blob] = getattr(self.get_submodule(path), attr)
        for run in self._steps:
            run(self, env)
        outputs = tuple(env[name] for name in self.output_names)
        return outputs[0] if len(outputs) == 1 else outputs

    def extra_repr(self) -> str:
        return (
            f"net={self.net_name!r}, inputs=[{', '.join(self.input_names)}], "
            f"outputs=[{', '.join(self.output_names)}]"
        )

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
