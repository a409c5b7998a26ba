"""netbrew as an onnx.backend Backend, used like onnxruntime.backend:

from netbrew.converters.onnx import backend
rep = backend.prepare(model)
outputs = rep.run([x])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, namedtupledict

from netbrew.converters.onnx.importer import import_model, node_to_op
from netbrew.errors import FeedError
from netbrew.executor import Workspace
from netbrew.executor.predictor import array_roots, detached, optimize_for_inference
from netbrew.executor.runtime import create_runtime


class NetbrewRep(BackendRep):
    """A prepared model: its init net already run, its predict net created."""

    def __init__(
        self,
        init_net,
        predict_net,
        optimize: bool = True,
        net_type: str | None = None,
        device: str = "cpu",
    ) -> None:
        if net_type is not None:  # before the passes: blob sharing respects the runtime
            predict_net.type = net_type
        self.workspace = Workspace()
        self.workspace.run_net_once(init_net)
        if optimize:  # the same graph passes a Predictor applies
            predict_net = optimize_for_inference(
                predict_net, self.workspace, params_are_constant=True, device=device
            )
        params = set(self.workspace.blobs())
        self.input_names = [b for b in predict_net.external_input if b not in params]
        self.output_names = list(predict_net.external_output)
        if device != "cpu":  # parameters to the GPU once, ops placed with copies
            from netbrew.executor.placement import plan_placement

            for name in params:
                self.workspace.feed_blob(name, self.workspace.fetch_blob(name), device=device)
            predict_net = plan_placement(
                predict_net, device=device, params=params, params_device=device
            ).net
        # made once: building the namedtuple class took 0.16 ms, on every run
        self._outputs = namedtupledict("Outputs", self.output_names)
        self.runtime = create_runtime(predict_net)
        self._param_roots = array_roots(self.workspace._blobs.values())

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        """Runs on a list (graph input order), a dict, or a single array."""
        blobs = dict(self.workspace._blobs)
        feeds = _bind(self.input_names, inputs)
        unknown = [n for n in feeds if n not in blobs and n not in self.input_names]
        if unknown:
            raise FeedError(
                f"unexpected input {unknown[0]!r}; the model's inputs are: "
                f"{', '.join(self.input_names) or 'none'}"
            )
        blobs.update(feeds)
        self.runtime.run(blobs)
        return self._outputs(
            *[detached(_host(blobs[name]), self._param_roots) for name in self.output_names]
        )


def _host(value: Any) -> Any:
    return value.get() if hasattr(value, "gpudata") else value


def _bind(names: Sequence[str], inputs: Any) -> dict[str, Any]:
    if isinstance(inputs, Mapping):
        return dict(inputs)
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    inputs = list(inputs)
    if len(inputs) > len(names):
        raise ValueError(f"got {len(inputs)} inputs, the model takes {len(names)}: {names}")
    return {name: _feed(value) for name, value in zip(names, inputs)}


def _feed(value: Any) -> Any:
    if isinstance(value, (np.ndarray, list, type(None))):
        return value
    return np.asarray(value)


class NetbrewBackend(Backend):
    """The onnx.backend.base.Backend over netbrew's executor: "CPU", or "CUDA"/"CUDA:N"
    when netbrew.cuda finds a GPU."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        kind, _, index = device.upper().partition(":")
        if kind == "CPU":
            return True
        if kind != "CUDA" or (index and not index.isdigit()):
            return False
        from netbrew import cuda

        return cuda.device_count() > int(index or 0)

    @classmethod
    def prepare(
        cls,
        model: onnx.ModelProto,
        device: str = "CPU",
        net_type: str | None = None,
        optimize: bool = True,
        **kwargs: Any,
    ) -> NetbrewRep:
        """Imports and prepares `model`.

        Args:
            net_type: the runtime (NetDef.type): "simple" (default) or "dag"/"parallel".
            optimize: apply the inference graph passes (as Predictor does).
        """
        kind, _, index = device.upper().partition(":")
        if kind == "CUDA":
            from netbrew import cuda

            where = f"cuda:{cuda.require(int(index or 0))}"  # DeviceError: what is missing
        elif kind == "CPU":
            where = "cpu"
        else:
            raise ValueError(f"netbrew's ONNX backend runs on CPU or CUDA, not {device!r}")
        init_net, predict_net = import_model(model, infer_shapes=optimize)
        return NetbrewRep(init_net, predict_net, optimize=optimize, net_type=net_type,
                          device=where)  # fmt: skip

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(
        cls, node: onnx.NodeProto, inputs: Any, device: str = "CPU", outputs_info=None, **kwargs
    ) -> tuple:
        ws = Workspace()
        names = [n for n in node.input if n]
        for name, value in _bind(names, inputs).items():
            ws.feed_blob(name, value)
        ws.run_operator_once(node_to_op(node))
        return namedtupledict("Outputs", list(node.output))(
            *[ws.fetch_blob(n) for n in node.output]
        )


prepare = NetbrewBackend.prepare
run_model = NetbrewBackend.run_model
run_node = NetbrewBackend.run_node
supports_device = NetbrewBackend.supports_device
