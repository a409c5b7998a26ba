"""Module: the base class of netbrew.nn layers, with PyTorch's registration rules."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from netbrew.nn import _dispatch
from netbrew.nn.parameter import Parameter


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) skipped."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class StateDictError(RuntimeError):
    """load_state_dict found missing or unexpected keys, or mismatched shapes."""


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of layers and models, as torch.nn.Module.

    Assigning a Parameter or a Module to an attribute registers it; `register_buffer`
    adds state that is saved but not trained (BatchNorm's running statistics).
    Calling the module runs `forward`. On NumPy arrays it runs eagerly through the
    operator registry; under `netbrew.converters.module.trace` the same code records a
    NetDef.

    Example:
        >>> from netbrew.nn import Linear, Module, functional as F
        >>> class MLP(Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc1 = Linear(4, 8)
        ...         self.fc2 = Linear(8, 3)
        ...     def forward(self, x):
        ...         return self.fc2(F.relu(self.fc1(x)))
        >>> MLP()
        MLP(
          (fc1): Linear(in_features=4, out_features=8, bias=True)
          (fc2): Linear(in_features=8, out_features=3, bias=True)
        )
    """

    training: bool

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing "forward"')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tracer = _dispatch.active_tracer()
        if tracer is None:
            return self.forward(*args, **kwargs)
        with tracer.scope(self):
            return self.forward(*args, **kwargs)

    # -- registration ---------------------------------------------------------------------

    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Adds a parameter (None keeps the name with no value, like a bias=False slot)."""
        self._check_init("parameters")
        _check_name(self, name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(netbrew.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Any, persistent: bool = True) -> None:
        """Adds saved, untrained state; `persistent=False` keeps it out of state_dict."""
        self._check_init("buffers")
        _check_name(self, name, "buffer", self._buffers)
        self._buffers[name] = None if tensor is None else np.asarray(tensor)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Adds a child module under `name`."""
        self._check_init("child modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str) or "." in name or not name:
            raise KeyError(f'module name must be a non-empty string without ".", got {name!r}')
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._forget(name, keep="_parameters")  # a reassigned one keeps its place
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(netbrew.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._check_init("child modules")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(netbrew.nn.Module or None expected)"
                )
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", ()):
            self._set_buffer(name, value)
        else:
            object.__setattr__(self, name, value)

    def _set_buffer(self, name: str, value: Any) -> None:
        tracer = _dispatch.active_tracer()
        if tracer is not None and tracer.owns(value):
            tracer.assign_state(self, name, value)
        elif value is None or isinstance(value, np.ndarray):
            self._buffers[name] = value
        else:
            raise TypeError(
                f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                "(numpy.ndarray or None expected)"
            )

    def _forget(self, name: str, keep: str | None = None) -> None:
        """Drops `name` from every store but `keep` (whose entry, and order, the caller
        overwrites, as PyTorch keeps a reassigned parameter's place in state_dict)."""
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers"):
            if name in d.get(store, ()):
                value = d[store][name]
                tracer = _dispatch.active_tracer()
                if tracer is not None and value is not None:
                    return tracer.read_state(self, name, value)
                return value
        if name in d.get("_modules", ()):
            return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, ()):
                del self.__dict__[store][name]
                return
        object.__delattr__(self, name)

    # -- iteration --------------------------------------------------------------------------

    def get_submodule(self, target: str) -> Module:
        """The descendant at dotted path `target` ('' is this module), as in PyTorch.

        Raises:
            AttributeError: no submodule at that path; names the missing part.
        """
        module: Module = self
        for name in target.split(".") if target else []:
            child = module._modules.get(name)
            if child is None:
                raise AttributeError(
                    f"{type(module).__name__} has no submodule {name!r} (looking up "
                    f"{target!r}); its children: {', '.join(module._modules) or 'none'}"
                )
            module = child
        return module

    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        """This module and every descendant, with dotted paths ('' for this one)."""
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                sub = f"{prefix}.{name}" if prefix else name
                yield from child.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(
        self, store: str, prefix: str, recurse: bool, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for path, module in mods:
            for name, value in module.__dict__[store].items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{path}.{name}" if path else name), value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) pairs, each shared parameter once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, np.ndarray]]:
        """(dotted name, array) pairs of the buffers (running statistics...)."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[np.ndarray]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and helpers ------------------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Sets training mode here and in every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        """train(False): BatchNorm uses its running statistics, Dropout passes through."""
        return self.train(False)

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Calls fn on every descendant, then on self (as PyTorch)."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    # -- state dict -------------------------------------------------------------------------

    def state_dict(self, prefix: str = "") -> OrderedDict[str, np.ndarray]:
        """Parameters and persistent buffers by dotted name, in PyTorch's order (each
        module's parameters, then its buffers, then its children). Values share memory
        with the module."""
        out: OrderedDict[str, np.ndarray] = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p.data
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b
        for name, child in self._modules.items():
            if child is not None:
                out.update(child.state_dict(prefix=f"{prefix}{name}."))
        return out

    def _state_slots(self) -> dict[str, tuple[Module, str]]:
        slots: dict[str, tuple[Module, str]] = {}
        for path, module in self.named_modules(remove_duplicate=False):
            prefix = f"{path}." if path else ""
            for name, value in module._parameters.items():
                if value is not None:
                    slots.setdefault(prefix + name, (module, name))
            for name, value in module._buffers.items():
                if value is not None and name not in module._non_persistent:
                    slots.setdefault(prefix + name, (module, name))
        return slots

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True
    ) -> IncompatibleKeys:
        """Copies values into the parameters and buffers, in place, cast to their dtypes.

        Args:
            state_dict: name -> array (NumPy arrays, or anything np.asarray takes, such as
                CPU torch tensors).
            strict: raise on missing or unexpected keys; shape mismatches always raise.

        Returns:
            The missing and unexpected keys (empty lists when strict).

        Raises:
            StateDictError: listing every problem, each naming its key.
        """
        slots = self._state_slots()
        missing = [k for k in slots if k not in state_dict]
        unexpected = [k for k in state_dict if k not in slots]
        problems = []
        if strict:
            problems += [f"missing key {k!r}" for k in missing]
            problems += [f"unexpected key {k!r}" for k in unexpected]
        values = {}
        for key, (module, name) in slots.items():
            if key not in state_dict:
                continue
            value = _to_numpy(state_dict[key])
            target = module.__dict__["_parameters"].get(name)
            if target is None:
                target = module.__dict__["_buffers"][name]
            if value.shape != target.shape:
                problems.append(
                    f"size mismatch for {key!r}: expected shape {list(target.shape)} "
                    f"(the module's), got {list(value.shape)}"
                )
            values[key] = (target, value)
        if problems:
            raise StateDictError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n  "
                + "\n  ".join(problems)
            )
        for target, value in values.values():
            np.copyto(target, value.astype(target.dtype, copy=False), casting="unsafe")
        return IncompatibleKeys(missing, unexpected)

    # -- printing ---------------------------------------------------------------------------

    def extra_repr(self) -> str:
        """The layer's settings, printed inside its parentheses; override in layers."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self) -> list[str]:
        keys = set(super().__dir__())
        for store in ("_parameters", "_buffers", "_modules"):
            keys |= set(self.__dict__.get(store, ()))
        return sorted(keys)


def _check_name(module: Module, name: str, kind: str, store: dict) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if "." in name or not name:
        raise KeyError(f'{kind} name must be a non-empty string without ".", got {name!r}')
    others = [module.__dict__[s] for s in ("_parameters", "_buffers", "_modules")]
    taken = name in module.__dict__ or any(name in o for o in others if o is not store)
    if taken and name not in store:
        raise KeyError(f"attribute '{name}' already exists")


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)
