"""(init_net, predict_net) -> a torch.nn.Module whose state_dict keys are the NetDef's blobs.

    >>> model = to_torch(init_net, predict_net)
    >>> print(model)
    NetModule(
      net='resnet', inputs=[x], outputs=[fc]
      (conv1): Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
      (bn1): BatchNorm2d(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
      (layer1): Module(
        (0): Module(
          (conv1): Conv2d(64, 64, kernel_size=(3, 3), ...
    >>> sorted(model.state_dict()) == sorted(init_blobs)
    True

Layers come from plan.py (Conv -> Conv1d/2d/3d, Gemm/FC -> Linear, BatchNormalization ->
BatchNorm1d/2d/3d, LayerNormalization -> LayerNorm, Gather on a table -> Embedding);
forward is an interpreter over the plan's steps: layer calls, and functional ops run as
torch calls (torch_functional.py). An op torch_functional does not cover runs netbrew's
NumPy kernel; it refuses to run where autograd would need a gradient through it.

Caffe2-style parameters (`conv1_w`) sit in a layer (`conv1`, a Conv2d) and state_dict /
load_state_dict rename `conv1.weight` <-> `conv1_w` through state-dict hooks, so saved keys
are the blob names; `named_parameters()` shows the module paths.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from netbrew.converters.module.plan import Plan, Step, build_plan
from netbrew.converters.module.plan_module import Backend, PlanForward, layer_runner
from netbrew.converters.module.torch_functional import TORCH_OPS, NumpyFallback
from netbrew.converters.module.torch_graph import import_torch, to_numpy
from netbrew.errors import UnsupportedConversion
from netbrew.executor.workspace import _netdef
from netbrew.proto.netbrew_pb2 import NetDef


def to_torch(init_net: Any, predict_net: Any) -> Any:
    """Builds a torch.nn.Module computing `predict_net` with the parameters of `init_net`.

    Args:
        init_net: fills the parameters (a Net or NetDef; None when there are none).
        predict_net: the forward net (a Net or NetDef).

    Returns:
        A module, in eval mode (a predict net's semantics; `.train()` to fine-tune), whose
        forward takes the net's inputs positionally, in the order of its
        external inputs, and returns its output (a tuple when there are several); its
        state_dict keys are exactly the blobs the init net fills.

    Raises:
        ImportError: torch is not installed.
    """
    torch = import_torch()
    reserved = PlanForward.reserved(torch.nn.Module())  # "training", "forward", ...
    plan = build_plan(init_net, predict_net, reserved=reserved)
    module = _module_class()(plan).eval()
    module._predict_net = NetDef()  # from_torch gives it back, with the module's weights
    module._predict_net.CopyFrom(_netdef(predict_net))
    return module


def _wrap_indices(indices: Any, rows: int) -> Any:
    """Gather's indices for nn.Embedding, which refuses negative ones: -1 is row rows-1."""
    return indices + (indices < 0).to(indices.dtype) * rows


def to_tensor(torch: Any, array: np.ndarray) -> Any:
    """A torch tensor with a copy of the array's values (bfloat16 through float32)."""
    array = np.asarray(array)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(array, copy=True, order="C"))


def _counterless_norms(torch: Any, root: Any) -> None:
    """BatchNorm layers without num_batches_tracked (a NetDef has no such blob): torch's
    loader adds the key itself to a state dict without version metadata (a plain dict,
    one read back from a file), then strict loading calls it unexpected. Drop that key."""
    norm = torch.nn.modules.batchnorm._NormBase
    added = {
        f"{path}.num_batches_tracked"
        for path, m in root.named_modules()
        if isinstance(m, norm) and m.track_running_stats and m.num_batches_tracked is None
    }
    if not added:
        return

    def after_load(mod, incompatible):
        keys = incompatible.unexpected_keys
        keys[:] = [k for k in keys if k not in added]

    root.register_load_state_dict_post_hook(after_load)


def _rename_hooks(module: Any, renames: dict[str, str]) -> None:
    """state_dict writes blob names; load_state_dict reads them (and reports them)."""
    inverse = {blob: key for key, blob in renames.items()}

    def rename(state: dict, prefix: str, table: dict[str, str]) -> None:
        items = list(state.items())
        state.clear()
        for key, value in items:
            local = key[len(prefix) :] if key.startswith(prefix) else None
            state[prefix + table[local] if local in table else key] = value

    def on_save(mod, state, prefix, local_metadata):
        rename(state, prefix, renames)

    def on_load(mod, state, prefix, local_metadata, strict, missing, unexpected, errors):
        rename(state, prefix, inverse)

    def after_load(mod, incompatible):
        keys = incompatible.missing_keys
        keys[:] = [renames.get(k, k) for k in keys]

    module.register_state_dict_post_hook(on_save)
    module.register_load_state_dict_pre_hook(on_load)
    module.register_load_state_dict_post_hook(after_load)


def _op_runner(torch: Any, index: int, step: Step):
    op, fn = step.op, TORCH_OPS.get(step.op.type)
    attrs = {**step.attrs, "_op": op.type, "_outputs": sum(1 for o in op.output if o)}
    if op.type == "Constant":
        value = to_tensor(torch, _constant_value(index, op))
        return lambda root, env: env.__setitem__(op.output[0], root._constant(op.output[0], value))
    numpy_op = functools.partial(_run_numpy, torch, _compiled(index, op))

    def run_op(root, env):
        args = [env[i] if i else None for i in step.inputs]
        scope = {name: env[name] for name in step.captured}
        try:
            results = fn(torch, args, attrs) if fn is not None else numpy_op(args, scope)
        except NumpyFallback:
            results = numpy_op(args, scope)
        for name, value in zip(step.outputs, results):
            if name:
                env[name] = value

    return run_op


def _compiled(index: int, op) -> Any:
    from netbrew.executor.compiled import compile_op

    return compile_op(index, op)


def _constant_value(index: int, op) -> np.ndarray:
    blobs: dict = {}
    _compiled(index, op).run(blobs)
    return blobs[op.output[0]]


def _run_numpy(torch: Any, compiled: Any, args: list, scope: dict | None = None) -> tuple:
    """Runs netbrew's NumPy kernel on tensors: exact, but outside autograd. `scope`: the
    outer blobs that the op's subgraphs read by name (If, Loop), by name."""
    op, scope = compiled.op, scope or {}
    tensors = [a for a in [*args, *scope.values()] if isinstance(a, torch.Tensor)]
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise UnsupportedConversion(
            f"{compiled.where} -> {', '.join(op.output)} has no torch implementation; it "
            "runs netbrew's NumPy kernel, which autograd cannot differentiate. Run the "
            "module under torch.no_grad(), or freeze the parameters it reads"
        )
    device = tensors[0].device if tensors else torch.device("cpu")
    named = [*zip(op.input, args), *scope.items()]
    blobs = {
        n: to_numpy(a) if isinstance(a, torch.Tensor) else a
        for n, a in named
        if n and a is not None
    }
    compiled.run(blobs)
    return tuple(to_tensor(torch, blobs[o]).to(device) if o else None for o in op.output)


@functools.cache
def _module_class() -> type:
    torch = import_torch()
    backend = Backend(
        nn=torch.nn,
        array=functools.partial(to_tensor, torch),
        is_float=lambda value: value.is_floating_point(),
        parameter=torch.nn.Parameter,
        layer_kwargs={"device": "meta"},  # no random init: the plan's values replace it
    )

    class NetModule(PlanForward, torch.nn.Module):
        """A NetDef as a torch module (see netbrew.converters.module.to_torch)."""

        def __init__(self, plan: Plan) -> None:
            super().__init__()
            self._setup(plan, backend)
            self._steps = [
                layer_runner(s, torch.flatten, _wrap_indices)
                if s.layer
                else _op_runner(torch, i, s)
                for i, s in enumerate(plan.steps)
            ]
            self._constants: dict[str, Any] = {}
            self._device = None
            if plan.renames:
                _rename_hooks(self, plan.renames)
            _counterless_norms(torch, self)

        def _constant(self, name: str, value: Any) -> Any:
            """A Constant op's tensor, moved (once) to the device of the inputs."""
            cached = self._constants.get(name)
            device = self._device or value.device
            if cached is None or cached.device != device:
                cached = self._constants[name] = value.to(device)
            return cached

        def _bind_inputs(self, inputs: tuple) -> None:
            first = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
            self._device = None if first is None else first.device

    NetModule.__module__, NetModule.__qualname__ = __name__, "NetModule"
    return NetModule
