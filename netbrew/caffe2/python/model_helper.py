"""caffe2.python.model_helper on netbrew: ModelHelper is netbrew's, with Caffe2's names.

Its nets are core.Nets, so a script's `model.net.Softmax(...)` takes Caffe2's spellings,
while brew's helpers add canonical ops to the same nets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbrew.brew.model_helper import ModelHelper as _ModelHelper
from netbrew.brew.model_helper import Tags
from netbrew.caffe2.python import core
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.net import BlobReference


class ModelHelper(_ModelHelper):
    """Caffe2's ModelHelper(name, init_params, arg_scope) on netbrew's."""

    net_class = core.Net

    def __init__(
        self,
        name: str | None = None,
        init_params: bool = True,
        allow_not_known_ops: bool = True,
        skip_sparse_optim: bool = False,
        param_model: Any = None,
        arg_scope: dict[str, Any] | None = None,
    ) -> None:
        if param_model is not None:
            raise NotImplementedError("ModelHelper(param_model=...): share parameters by name")
        super().__init__(name or "model", arg_scope=arg_scope, init_params=init_params)
        self.grad_map: dict[str, str] = {}

    def AddGradientOperators(self, losses: Any, *args: Any, **kwargs: Any) -> dict[str, str]:  # noqa: N802
        """Gradients of every blob upstream of `losses`, as Caffe2's did (parameters made
        directly with param_init_net fills get theirs too); param_to_grad maps `params`."""
        if self.grad_map:
            raise RuntimeError("You cannot run AddGradientOperators twice.")
        losses = [str(b) for b in (losses if isinstance(losses, (list, tuple)) else [losses])]
        self.grad_map = add_gradient_ops(self.net, losses)
        self.param_to_grad = {p: self.grad_map[p] for p in self.params if p in self.grad_map}
        return self.grad_map

    def GetParams(self, namescope: str | None = None, top_scope: bool = False) -> list:  # noqa: N802
        return _in_scope(self.params, namescope)

    def GetComputedParams(self, namescope: str | None = None) -> list:  # noqa: N802
        return _in_scope(self.computed_params, namescope)

    def GetAllParams(self, namescope: str | None = None) -> list:  # noqa: N802
        return self.GetParams(namescope) + self.GetComputedParams(namescope)

    def AddParameter(self, param: str, tags: Any = None) -> BlobReference:  # noqa: N802
        """Registers a blob the init net fills (Caffe2's AddParameter)."""
        tag = Tags.COMPUTED if tags and "COMPUTED" in str(tags) else Tags.WEIGHT
        return self.add_param(str(param), (), tag)

    def Proto(self):  # noqa: N802
        return self.net.Proto()

    def RunAllOnGPU(self, gpu_id: int = 0, use_cudnn: bool = False) -> None:  # noqa: N802
        """Places every op on CUDA device `gpu_id` (netbrew's run_all_on); without a GPU
        they run on the CPU, with a warning."""
        option = core.on_cpu_if_no_gpu(core.DeviceOption(1, gpu_id), "RunAllOnGPU")
        self.run_all_on(option)


def _in_scope(blobs: Sequence[str], namescope: str | None) -> list:
    if not namescope:
        return list(blobs)
    prefix = namescope if namescope.endswith("/") else namescope + "/"
    return [b for b in blobs if b.startswith(prefix)]
