"""arg_scope: default keyword arguments for brew helpers inside a `with` block."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from netbrew.netdef.scope import canonical_scope

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


# Caffe2's helper arguments that chose an implementation and do not change results:
# accepted and dropped, so that a brew script written for Caffe2 runs unchanged.
CAFFE2_TUNING = frozenset(
    {"use_cudnn", "cudnn_exhaustive_search", "ws_nbytes_limit", "exhaustive_search",
     "float16_compute", "enable_tensor_core"}
)  # fmt: skip


# helpers whose ops read a layout: a model-wide arg_scope order reaches them even though
# their signatures take no `order` (Caffe2's took it through **kwargs)
LAYOUT_HELPERS = frozenset(
    "conv conv_transpose max_pool average_pool global_avg_pool global_max_pool spatial_bn "
    "concat".split()
)


def helper(fn: Callable) -> Callable:
    """Marks a brew helper: arg_scope defaults and the model's arg_scope are merged in.

    Caffe2's spellings are accepted here, in one place: its tuning arguments
    (CAFFE2_TUNING) are dropped, `order` must be "NCHW" (the layout brew builds), and
    `blob_out=None` gets a fresh name, as Caffe2's `model.net.NextName()` gave. The
    helper's ops are added in canonical_scope."""

    @functools.wraps(fn)
    def wrapped(model, *args, **kwargs):
        scoped = _stack()[-1].get(fn.__name__, {})
        model_scope = getattr(model, "arg_scope", {}) or {}
        merged = {**_accepted(fn, model_scope), **scoped, **kwargs}
        merged = {k: v for k, v in merged.items() if k not in CAFFE2_TUNING}
        order = merged.pop("order", "NCHW")
        if fn.__name__ in LAYOUT_HELPERS and "order" not in merged:
            order = {**model_scope, **scoped, **kwargs}.get("order", order)
        if order != "NCHW":
            raise ValueError(
                f"brew.{fn.__name__}: order={order!r} is not supported (whether given to "
                "the helper, an arg_scope or the model's arg_scope); brew builds NCHW nets"
            )
        args = _name_blob_out(fn, model, args, merged)
        with canonical_scope():
            return fn(model, *args, **merged)

    wrapped.helper_name = fn.__name__
    return wrapped


def _name_blob_out(fn: Callable, model: Any, args: tuple, kwargs: dict[str, Any]) -> tuple:
    """`args` with a blob_out of None (positional or keyword) replaced by a fresh name."""
    import inspect

    names = list(inspect.signature(fn).parameters)[1:]
    if "blob_out" not in names:
        return args
    index = names.index("blob_out")
    if index < len(args) and args[index] is None:
        args = (*args[:index], _next_name(model, fn.__name__), *args[index + 1 :])
    elif "blob_out" in kwargs and kwargs["blob_out"] is None:
        kwargs["blob_out"] = _next_name(model, fn.__name__)
    return args


def _next_name(model: Any, helper_name: str) -> str:
    counter = getattr(model, "_blob_counter", 0)
    model._blob_counter = counter + 1
    return f"{model.net.name}_{helper_name}_{counter}"


def _accepted(fn: Callable, values: dict[str, Any]) -> dict[str, Any]:
    """The model-wide defaults a helper takes by name (others would be op arguments)."""
    import inspect

    params = inspect.signature(fn).parameters
    return {k: v for k, v in values.items() if k in params}
