"""One registry class for schemas, kernels, gradients and converters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from netbrew.errors import UnknownOperatorError, suggest

K = TypeVar("K")
V = TypeVar("V")


class Registry(Generic[K, V]):
    """A dict that refuses duplicates and suggests near names on a miss.

    Args:
        kind: what the registry holds, used in messages ("operator schema", "kernel").
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[K, V] = {}

    def add(self, key: K, value: V) -> V:
        if key in self._items:
            raise ValueError(f"{self.kind} {key!r} is already registered")
        self._items[key] = value
        return value

    def register(self, key: K) -> Callable[[V], V]:
        """Decorator form of `add`."""
        return lambda value: self.add(key, value)

    def __getitem__(self, key: K) -> V:
        try:
            return self._items[key]
        except KeyError:
            name = key[0] if isinstance(key, tuple) else key
            names = sorted({k[0] if isinstance(k, tuple) else k for k in self._items})
            hint = suggest(str(name), [str(n) for n in names])
            raise UnknownOperatorError(f"{key!r} is not a registered {self.kind}.{hint}") from None

    def get(self, key: K, default: V | None = None) -> V | None:
        return self._items.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self):
        return self._items.items()
