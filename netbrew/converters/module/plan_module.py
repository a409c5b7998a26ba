"""A Plan (plan.py) as a module tree, for the torch.nn and netbrew.nn backends alike.

`build_tree` makes the containers, layers and other parameters in the init net's order;
`PlanForward` gives a backend's NetModule its forward and printing; a `Backend` names what
differs between torch.nn and netbrew.nn. Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netbrew.converters.module.plan import BUFFERS, Layer, Plan, Step


@dataclass(frozen=True)
class Backend:
    """What a module backend provides to build a plan's module tree.

    Attributes:
        nn: the namespace with Module and the layer classes (torch.nn or netbrew.nn).
        array: a plan value (an ndarray) -> a copy as the backend's array.
        is_float: whether a backend array is floating point (else it is a buffer).
        parameter: a backend array -> the backend's Parameter.
        layer_kwargs: extra keyword arguments for layer constructors (torch: device="meta",
            so layers skip their random init; the plan's values replace it).
    """

    nn: Any
    array: Callable[[np.ndarray], Any]
    is_float: Callable[[Any], bool]
    parameter: Callable[[Any], Any]
    layer_kwargs: dict[str, Any] = field(default_factory=dict)

    def set_state(self, module: Any, name: str, value: np.ndarray, buffer: bool) -> None:
        """Registers a copy of `value` as parameter `name` (floating point, not a buffer)
        or as a buffer, replacing a parameter the layer made under that name."""
        value = self.array(value)
        if buffer or not self.is_float(value):
            if name in module._parameters:
                delattr(module, name)
            module.register_buffer(name, value)
        else:
            module.register_parameter(name, self.parameter(value))

    def make_layer(self, layer: Layer, params: dict[str, np.ndarray]) -> Any:
        """The layer's class with its configuration, holding the plan's values."""
        module = getattr(self.nn, layer.class_name)(**layer.config, **self.layer_kwargs)
        for attr, blob in layer.params.items():
            self.set_state(module, attr, params[blob], attr in BUFFERS)
        if "num_batches_tracked" in module._buffers and "num_batches_tracked" not in layer.params:
            module.num_batches_tracked = None  # the NetDef has none: keep it out of state_dict
        return module


def build_tree(root: Any, plan: Plan, backend: Backend) -> None:
    """Containers, layers and other parameters of `plan` under `root`, in the init net's
    order (so state_dict lists the blobs as the init net fills them)."""
    containers = set(plan.containers())
    made: set[str] = {""}
    for blob, value in plan.params.items():
        path, attr = plan.placement[blob]
        parts = path.split(".") if path else []
        for k in range(1, len(parts) + 1):
            sub = ".".join(parts[:k])
            if sub in containers and sub not in made:
                parent = root.get_submodule(".".join(parts[: k - 1]))
                parent.add_module(parts[k - 1], backend.nn.Module())
                made.add(sub)
        layer = plan.layers.get(path)
        if layer is None or attr not in layer.params:
            backend.set_state(root.get_submodule(path), attr, value, blob in plan.buffers)
        elif path not in made:
            parent, _, name = path.rpartition(".")
            root.get_submodule(parent).add_module(name, backend.make_layer(layer, plan.params))
            made.add(path)


def layer_runner(
    step: Step,
    flatten: Callable[[Any, int], Any],
    wrap_indices: Callable[[Any, int], Any] | None = None,
) -> Callable[[Any, dict], None]:
    """A step that calls its layer (after flatten(x, axis) where the plan asks for it).

    An Embedding comes from a Gather, whose indices may count from the end (-1 is the
    last row); a backend whose Embedding refuses that passes `wrap_indices(x, rows)`."""
    path, x, out, axis = step.layer.path, step.inputs[0], step.outputs[0], step.flatten_axis
    rows = step.layer.config["num_embeddings"] if step.layer.kind == "Embedding" else None
    if wrap_indices is None:
        rows = None

    def run_layer(root: Any, env: dict) -> None:
        value = env[x]
        if axis is not None:
            value = flatten(value, axis)
        if rows is not None:
            value = wrap_indices(value, rows)
        env[out] = root.get_submodule(path)(value)

    return run_layer


class PlanForward:
    """forward and extra_repr of a module built from a Plan; mixed into a backend's
    Module (listed first), whose __init__ calls `_setup` and sets `_steps`."""

    net_name: str
    input_names: list[str]
    output_names: list[str]
    _steps: list[Callable[[Any, dict], None]]

    # what the backends' NetModules set on each instance: no parameter may take these names
    INSTANCE_ATTRIBUTES = frozenset(
        "net_name input_names output_names _steps _state_refs _constants _device _renames "
        "_inverse _predict_net".split()
    )

    @classmethod
    def reserved(cls, module: Any) -> Callable[[str], bool]:
        """Whether a name is taken on a NetModule built over the backend Module `module`
        (its attributes, PlanForward's, and the instances' own)."""
        return (set(dir(module)) | set(dir(cls)) | cls.INSTANCE_ATTRIBUTES).__contains__

    def _setup(self, plan: Plan, backend: Backend) -> None:
        self.net_name = plan.name
        self.input_names = list(plan.inputs)
        self.output_names = list(plan.outputs)
        build_tree(self, plan, backend)
        self._state_refs = [(blob, path, attr) for blob, (path, attr) in plan.placement.items()]

    def _bind_inputs(self, inputs: tuple) -> None:
        """Called with the inputs before the steps run (torch notes their device)."""

    def forward(self, *inputs: Any) -> Any:
        env = self.blobs(*inputs)
        outputs = tuple(env[name] for name in self.output_names)
        return outputs[0] if len(outputs) == 1 else outputs

    def blobs(self, *inputs: Any) -> dict[str, Any]:
        """Runs forward on `inputs` and answers every blob's value by its NetDef name
        (inputs, parameters and intermediates): what nb.compare checks against netbrew."""
        if len(inputs) != len(self.input_names):
            raise TypeError(
                f"{self.net_name}: forward takes {len(self.input_names)} inputs "
                f"({', '.join(self.input_names)}), got {len(inputs)}"
            )
        env = dict(zip(self.input_names, inputs))
        self._bind_inputs(inputs)
        for blob, path, attr in self._state_refs:
            env[blob] = getattr(self.get_submodule(path), attr)
        for run in self._steps:
            run(self, env)
        return env

    def extra_repr(self) -> str:
        return (
            f"net={self.net_name!r}, inputs=[{', '.join(self.input_names)}], "
            f"outputs=[{', '.join(self.output_names)}]"
        )
