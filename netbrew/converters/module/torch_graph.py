"""What from_torch's converters work with: the traced graph, its recorded values, and the
NetDef being built (TorchGraph), plus the torch <-> NumPy helpers they share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.errors import UnsupportedConversion
from netbrew.netdef.net import Net
from netbrew.netdef.tensor import from_array

_INSTALL = "pip install netbrew[torch]"
WRAPPED = "wrapped_layer"  # the attribute a lone torch.nn layer is traced under


def import_torch() -> Any:
    """The torch module, or an ImportError that says how to install it."""
    try:
        import torch
        import torch.fx  # noqa: F401  (a submodule torch does not import eagerly)
    except ImportError as e:
        raise ImportError(
            f"converting to or from PyTorch needs torch, which is not installed: {_INSTALL}"
        ) from e
    return torch


@dataclass
class Problem:
    """One fx node that could not be converted."""

    node: str
    target: str
    reason: str


def target_name(node: Any, root: Any) -> str:
    """A readable name for a node's target: torch.nn.Conv2d, torch.erf, Tensor.view."""
    if node.op == "call_module":
        cls = type(root.get_submodule(node.target))
        module = "torch.nn" if cls.__module__.startswith("torch.nn.modules") else cls.__module__
        return f"{module}.{cls.__qualname__}"
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    module = getattr(target, "__module__", None) or "torch"
    module = {"_operator": "operator", "torch._C._nn": "torch.nn.functional"}.get(module, module)
    return f"{module}.{getattr(target, '__name__', repr(target))}"


class TorchGraph:
    """What converters see: the traced module, the recorded values, the net being built.

    Args:
        torch: the torch module.
        gm: the traced GraphModule.
        values: fx Node -> the value it had on the example inputs.
        params: the module's state_dict keys (the parameter blob names).
        name: the predict net's name.
    """

    def __init__(self, torch: Any, gm: Any, values: dict, params: Sequence[str], name: str):
        self.prefix = WRAPPED + "." if WRAPPED in gm._modules else ""
        self.torch = torch
        self.gm = gm
        self.values = values
        self.params = set(params)
        self.net = Net(name)
        self.blobs: dict[Any, str | list[str]] = {}  # tensor-valued nodes -> blob name(s)
        self.folded: dict[Any, Any] = {}  # Python-valued nodes -> their value
        self.dims: dict[Any, Any] = {}  # size nodes -> (tensor node, dim) or a list of them
        self.taken: set[str] = set(params)
        self.problems: list[Problem] = []

    # -- names and ops ----------------------------------------------------------------

    def fresh(self, hint: str) -> str:
        """A blob name not used yet: `hint`, else `hint_1`, `hint_2`, ..."""
        name, k = hint, 0
        while name in self.taken:
            k += 1
            name = f"{hint}_{k}"
        self.taken.add(name)
        return name

    def emit(self, op_type: str, inputs: Sequence[str], out: Any, **attrs: Any) -> str:
        """Appends an op with one output. `out` is the fx Node it computes (its blob is
        named after the node) or a name hint for an intermediate blob."""
        is_node = not isinstance(out, str)
        name = self.fresh(out.name if is_node else out)
        self.net.add_op(op_type, list(inputs), [name], **attrs)
        if is_node:
            self.blobs[out] = name
        return name

    def emit_multi(self, op_type: str, inputs: Sequence[str], node: Any, n: int, **attrs) -> None:
        """Appends an op with n outputs, computing the tuple-valued `node`."""
        names = [self.fresh(f"{node.name}_{i}") for i in range(n)]
        self.net.add_op(op_type, list(inputs), names, **attrs)
        self.blobs[node] = names

    def alias(self, node: Any, arg: Any) -> None:
        """`node` computes the same tensor as `arg` (Identity, Dropout in eval, contiguous)."""
        self.blobs[node] = self.blob(arg)

    def const(self, value: Any, hint: str, dtype: Any = None) -> str:
        """A Constant op holding `value` (array, tensor or Python number)."""
        if isinstance(value, self.torch.Tensor):
            value = to_numpy(value)
        array = np.asarray(value, dtype=dtype)
        if array.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)  # Python floats: torch's default dtype
        return self.emit("Constant", [], hint, value=from_array(array))

    # -- arguments --------------------------------------------------------------------

    def is_node(self, arg: Any) -> bool:
        return isinstance(arg, self.torch.fx.Node)

    def value(self, arg: Any) -> Any:
        """The Python value of an argument: folded nodes give their value, tensor nodes
        their recorded tensor; lists and tuples are resolved item by item."""
        if self.is_node(arg):
            return self.folded[arg] if arg in self.folded else self.values[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.value(a) for a in arg)
        if isinstance(arg, slice):
            return slice(self.value(arg.start), self.value(arg.stop), self.value(arg.step))
        return arg

    def blob(self, arg: Any, like: Any = None) -> str:
        """The blob of a tensor argument; numbers and folded values become Constants
        (with the dtype of the tensor argument `like`, where given)."""
        if self.is_node(arg) and arg in self.blobs:
            blob = self.blobs[arg]
            if isinstance(blob, list):
                raise UnsupportedConversion(f"{arg.name!r} is a tuple of tensors, not a tensor")
            return blob
        value = self.value(arg)
        dtype = None
        if like is not None and not isinstance(value, self.torch.Tensor):
            dtype = np_dtype(self.value(like).dtype)
        return self.const(value, f"{arg.name if self.is_node(arg) else 'const'}", dtype)

    def tensor(self, arg: Any) -> Any:
        """The recorded tensor of an argument (for its shape and dtype)."""
        value = self.value(arg)
        return value if isinstance(value, self.torch.Tensor) else self.torch.as_tensor(value)

    def module(self, node: Any) -> Any:
        return self.gm.get_submodule(node.target)

    def arg(self, node: Any, index: int, name: str, default: Any = None) -> Any:
        """An option of a call: a module's attribute `name` for call_module; otherwise
        positional argument `index` (the input is 0) or keyword `name`, as a value."""
        if node.op == "call_module":
            return getattr(self.module(node), name, default)
        if index < len(node.args):
            return self.value(node.args[index])
        return self.value(node.kwargs.get(name, default))

    def weight(self, node: Any, name: str, index: int) -> str | None:
        """The blob of a layer's parameter: `<module path>.<name>` for call_module (None
        when the module has none), else the call's argument `index` or keyword `name`."""
        if node.op == "call_module":
            if getattr(self.module(node), name, None) is None:
                return None
            key = self.state_key(f"{node.target}.{name}")
            if key not in self.params:
                raise UnsupportedConversion(f"its {name} is not a state_dict entry ({key!r})")
            return key
        arg = node.args[index] if index < len(node.args) else node.kwargs.get(name)
        return None if arg is None else self.blob(arg)

    def state_key(self, qualified_name: str) -> str:
        """The state_dict key of a traced attribute path (a lone layer is traced wrapped)."""
        return qualified_name.removeprefix(self.prefix)


def np_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype of a torch dtype."""
    import torch

    if dtype == torch.bfloat16:
        from ml_dtypes import bfloat16

        return np.dtype(bfloat16)
    return torch.empty((), dtype=dtype).numpy().dtype


def to_numpy(tensor: Any) -> np.ndarray:
    """A detached CPU copy of a tensor as an ndarray (bfloat16 through ml_dtypes)."""
    import torch

    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        return tensor.float().numpy().astype(np_dtype(tensor.dtype))
    return tensor.numpy().copy()


def int64_const(g: TorchGraph, node: Any, values: Any, what: str) -> str:
    """A Constant int64 tensor (shapes, axes, indices) named after `node`."""
    return g.const(np.asarray(values, dtype=np.int64), f"{node.name}_{what}")


def rank_of(g: TorchGraph, arg: Any) -> int:
    """The rank of a tensor argument on the example inputs."""
    return g.tensor(arg).dim()
