"""arg_scope: default keyword arguments for brew helpers inside a `with` block."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_state = threading.local()


def _stack() -> list[dict[str, dict[str, Any]]]:
    if not hasattr(_state, "stack"):
        _state.stack = [{}]
    return _state.stack


@contextmanager
def arg_scope(helpers: Callable | Iterable[Callable], **defaults: Any) -> Iterator[None]:
    """Inside the block, calls to `helpers` get `defaults` unless they pass the argument.

    Example:
        >>> with brew.arg_scope([brew.conv, brew.fc], weight_init=brew.MSRAInit()):
        ...     brew.conv(model, "data", "conv1", 1, 8, kernel=3)
    """
    helpers = [helpers] if callable(helpers) else list(helpers)
    top = {name: dict(kw) for name, kw in _stack()[-1].items()}
    for helper in helpers:
        name = getattr(helper, "helper_name", None)
        if name is None:
            raise TypeError(f"{helper!r} is not a brew helper")
        top.setdefault(name, {}).update(defaults)
    _stack().append(top)
    try:
        yield
    finally:
        _stack().pop()


def helper(fn: Callable) -> Callable:
    """Marks a brew helper: arg_scope defaults and the model's arg_scope are merged in."""

    @functools.wraps(fn)
    def wrapped(model, *args, **kwargs):
        scoped = _stack()[-1].get(fn.__name__, {})
        model_scope = getattr(model, "arg_scope", {}) or {}
        merged = {**_accepted(fn, model_scope), **scoped, **kwargs}
        return fn(model, *args, **merged)

    wrapped.helper_name = fn.__name__
    return wrapped


def _accepted(fn: Callable, values: dict[str, Any]) -> dict[str, Any]:
    """The model-wide defaults a helper takes by name (others would be op arguments)."""
    import inspect

    params = inspect.signature(fn).parameters
    return {k: v for k, v in values.items() if k in params}
