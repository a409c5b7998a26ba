"""Sequential, ModuleList and ModuleDict, as in torch.nn."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from netbrew.nn.module import Module, _addindent


def _index(n: int, idx: int, kind: str) -> int:
    if not isinstance(idx, int):
        raise TypeError(f"{kind} indices must be integers or slices, not {type(idx).__name__}")
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {kind} of length {n}")
    return idx % n


class Sequential(Module):
    """Runs its modules in order, each on the previous one's output.

    Built from modules (named "0", "1", ...) or from an OrderedDict of name -> module.
    Supports len, iteration, integer indexing and slicing (a slice is a new Sequential).

    Example:
        >>> Sequential(Linear(4, 8), ReLU(), Linear(8, 3))
        Sequential(
          (0): Linear(in_features=4, out_features=8, bias=True)
          (1): ReLU()
          (2): Linear(in_features=8, out_features=3, bias=True)
        )
    """

    def __init__(self, *args: Module) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index(len(items), idx, "Sequential")][1]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(len(self._modules), idx, "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)
        doomed = (
            keys[idx] if isinstance(idx, slice) else [keys[_index(len(keys), idx, "Sequential")]]
        )
        for key in doomed:
            del self._modules[key]
        # renumber, as PyTorch does
        self.__dict__["_modules"] = OrderedDict(
            (str(i), m) for i, m in enumerate(self._modules.values())
        )

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules, registered so their parameters are found; not callable.

    Printing groups runs of identical modules as PyTorch does: `(0-2): 3 x Linear(...)`.
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx: int | slice) -> Any:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        return items[_index(len(items), idx, "ModuleList")]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(len(self), idx, "ModuleList")), module)

    def __delitem__(self, idx: int | slice) -> None:
        items = list(self._modules.values())
        del items[idx]
        self.__dict__["_modules"] = OrderedDict((str(i), m) for i, m in enumerate(items))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self.__dict__["_modules"] = OrderedDict()
        self.extend(items)

    def __repr__(self) -> str:
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list[list] = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for start, end, r in blocks:
            head = f"({start})" if start == end else f"({start}-{end}): {end - start + 1} x"
            sep = ": " if start == end else " "
            lines.append(_addindent(f"{head}{sep}{r}", 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered under their keys."""

    def __init__(self, modules: Mapping[str, Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module
