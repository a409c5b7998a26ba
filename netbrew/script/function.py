"""`netbrew.script`: the callable a scripted function or module becomes.

    >>> @netbrew.script
    ... def clip_sum(x, n: int):
    ...     total = F.zeros(x.shape[1])
    ...     for i in range(n):
    ...         total = total + x[i]
    ...         if total.sum() > 10.0:
    ...             break
    ...     return total
    >>> clip_sum(np.ones((5, 3), np.float32), 4)        # runs the compiled NetDef
    >>> clip_sum.predict_net                             # Loop with the body as a subnet

The source is checked when `script` is called (every construct outside the subset is
reported at once); the nets are built on the first call, specialised on each tensor
argument's dtype and rank (netbrew.nn.functional chooses ops by rank, as trace does), and
cached per such signature. Dims stay dynamic: `x.shape[i]` is read at run time.
`compile(*examples)` builds them without running.

Called while another trace or script records (a submodule's scripted forward inside
`trace`, a scripted helper called from a scripted function), the function is inlined
into that recording, control flow included.
"""

from __future__ import annotations

import contextvars
import types
from typing import Any

import numpy as np

from netbrew.executor.runtime import create_runtime
from netbrew.executor.workspace import Workspace
from netbrew.netdef.passes import fuse_elementwise, optimize
from netbrew.nn._dispatch import active_tracer, reset_tracer, set_tracer
from netbrew.nn._tracer import TracedValue, Tracer
from netbrew.nn.module import Module
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.script.interpreter import inline
from netbrew.script.nets import build_nets, finish
from netbrew.script.source import BOOL, FLOAT, INT, TENSOR, Parsed, parse
from netbrew.script.values import SCALAR_DTYPES, TensorList, is_runtime, materialize, with_kind

_EAGER: contextvars.ContextVar[bool] = contextvars.ContextVar("netbrew_script_eager", default=False)


class Compiled:
    """One specialisation: the NetDef pair and the runtime that runs it.

    The runtime runs `predict_net` after the inference passes that read no parameter
    values (dead code, constant folding, CSE, then elementwise fusion, which fuses loop
    bodies: a custom LSTM's gate math becomes one FusedElementwise per step), as
    Predictor runs it. Not BatchNorm folding: a module's parameters are fed at each call,
    and training may change them. `predict_net` itself stays as compiled, for export.
    """

    def __init__(self, init_net: NetDef, predict_net: NetDef, inputs: list, kinds: list, tuple_):
        self.init_net, self.predict_net = init_net, predict_net
        self.inputs, self.kinds, self.is_tuple = inputs, kinds, tuple_
        ws = Workspace()
        ws.run_net_once(init_net)
        self.params = {b: ws.fetch_blob(b) for b in ws.blobs()}
        # the state the net writes (running statistics) is an output the passes must keep
        run_net = NetDef()
        run_net.CopyFrom(predict_net)
        written = {o for op in predict_net.op for o in op.output} & set(self.params)
        run_net.external_output.extend(sorted(written - set(run_net.external_output)))
        self.runtime = create_runtime(fuse_elementwise(optimize(run_net, level=1)))

    def nets(self) -> tuple[NetDef, NetDef]:
        return self.init_net, self.predict_net

    def __call__(self, args: list, state: dict[str, Any] | None = None) -> Any:
        blobs = dict(self.params)
        if state:
            blobs.update(state)
        blobs.update(zip(self.inputs, (_feed(a, k) for a, k in zip(args, self.kinds))))
        self.runtime.run(blobs)
        if state:  # buffers the net updated (BatchNorm's running statistics, counters)
            for name, value in state.items():
                if blobs[name] is not value and isinstance(value, np.ndarray):
                    np.copyto(value, blobs[name], casting="unsafe")
        outs = tuple(blobs[n] for n in self.predict_net.external_output)
        return outs if self.is_tuple else outs[0]


def _feed(value: Any, kind: str) -> np.ndarray:
    if kind == TENSOR:
        return value if isinstance(value, np.ndarray) else np.asarray(value)
    array = np.asarray(value)
    if kind == INT and not (array.dtype.kind in "iub" and array.ndim == 0):
        raise TypeError(f"an int argument got {value!r} ({array.dtype}); pass an int")
    return np.asarray(value, SCALAR_DTYPES[kind])


def _key(args: list, kinds: list[str]) -> tuple:
    return tuple(
        (np.asarray(a).dtype.str, np.ndim(a)) if k == TENSOR else k for a, k in zip(args, kinds)
    )


class ScriptFunction:
    """A scripted function: call it on NumPy arrays (and numbers for int/float/bool
    arguments) to run its compiled net; `.init_net` / `.predict_net` are the nets of the
    latest call or `compile`. As a method decorator (`@netbrew.script def forward`), it
    binds to the module, whose parameters become init-net blobs named by path."""

    def __init__(self, fn: Any) -> None:
        self.parsed: Parsed = parse(fn)
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._compiled: dict[tuple, Compiled] = {}
        self._last: Compiled | None = None

    def __get__(self, owner: Any, cls: Any = None) -> Any:
        return self if owner is None else BoundScript(self, owner)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self, None, args, kwargs)

    def compile(self, *examples: Any) -> tuple[NetDef, NetDef]:
        """Builds (and caches) the nets for arguments like `examples`."""
        return _compiled(self, None, list(examples)).nets()

    def eager(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the Python function itself (scripted callees too), as plain NumPy code."""
        token = _EAGER.set(True)
        try:
            return self.parsed.fn(*args, **kwargs)
        finally:
            _EAGER.reset(token)

    init_net = property(lambda self: _latest(self._last, self).init_net)
    predict_net = property(lambda self: _latest(self._last, self).predict_net)


class BoundScript:
    """A scripted method bound to its Module (or `script(module)`)."""

    def __init__(self, function: ScriptFunction, owner: Module) -> None:
        self.function, self.owner = function, owner
        self.parsed = function.parsed
        self.__name__ = function.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self.function, self.owner, args, kwargs)

    def compile(self, *examples: Any) -> tuple[NetDef, NetDef]:
        return _compiled(self.function, self.owner, list(examples)).nets()

    def eager(self, *args: Any, **kwargs: Any) -> Any:
        return self.function.eager(self.owner, *args, **kwargs)

    def _last(self) -> Compiled | None:
        return self.owner.__dict__.get("_script_last", {}).get(id(self.function))

    init_net = property(lambda self: _latest(self._last(), self).init_net)
    predict_net = property(lambda self: _latest(self._last(), self).predict_net)


def _latest(compiled: Compiled | None, fn: Any) -> Compiled:
    if compiled is None:
        raise RuntimeError(
            f"{fn.__name__} has not been compiled yet: call it once, or call "
            ".compile(*example_args); nets are specialised on argument dtypes and ranks"
        )
    return compiled


def _arg_kinds(parsed: Parsed, owner: Any) -> tuple[list[str], list[str]]:
    names = parsed.arg_names[1:] if owner is not None else parsed.arg_names
    return names, [parsed.arg_types[n] for n in names]


def _call(function: ScriptFunction, owner: Any, args: tuple, kwargs: dict) -> Any:
    tracer = active_tracer()
    fn = function.parsed.fn if owner is None else types.MethodType(function.parsed.fn, owner)
    if tracer is not None:
        return inline(fn, list(args), kwargs, tracer, function.parsed)
    if _EAGER.get():
        return fn(*args, **kwargs)
    args = _bind_defaults(function, owner, args, kwargs)
    compiled = _compiled(function, owner, list(args))
    state = None
    if owner is not None:  # the module's current values, which training may have changed
        state = dict(owner.named_parameters())
        state.update(owner.named_buffers())
    return compiled(list(args), state)


def _bind_defaults(function: ScriptFunction, owner: Any, args: tuple, kwargs: dict) -> tuple:
    """The arguments in order, keywords and the function's defaults filled in, as Python
    binds them (TypeError names what is missing or unexpected)."""
    import inspect

    signature = inspect.signature(function.parsed.fn)
    bound = signature.bind(*((owner,) if owner is not None else ()), *args, **kwargs)
    bound.apply_defaults()
    values = list(bound.arguments.values())
    return tuple(values[1:] if owner is not None else values)


def _compiled(function: ScriptFunction, owner: Any, args: list) -> Compiled:
    names, kinds = _arg_kinds(function.parsed, owner)
    if len(args) != len(names):
        raise TypeError(f"{function.__name__} takes {len(names)} arguments, got {len(args)}")
    key = _key(args, kinds)
    cache = function._compiled if owner is None else owner.__dict__.setdefault("_script_nets", {})
    # a module compiles apart in train and eval mode (Dropout, BatchNorm differ)
    modes = () if owner is None else tuple(m.training for m in owner.modules())
    full_key = key if owner is None else (id(function), key, modes)
    compiled = cache.get(full_key)
    if compiled is None:
        compiled = cache[full_key] = _compile(function, owner, names, kinds, args)
    if owner is None:
        function._last = compiled
    else:
        owner.__dict__.setdefault("_script_last", {})[id(function)] = compiled
    return compiled


def _compile(function, owner, names: list[str], kinds: list[str], args: list) -> Compiled:
    root = owner if owner is not None else Module()
    tracer = Tracer(root, reserved=names)
    values = [with_kind(tracer.add_input(n, _feed(a, k)), k) for n, a, k in zip(names, args, kinds)]
    fn = function.parsed.fn if owner is None else types.MethodType(function.parsed.fn, owner)
    token = set_tracer(tracer)
    try:
        result = inline(fn, values, {}, tracer, function.parsed)
        items = list(result) if isinstance(result, tuple) else [result]
        outputs = [_output(tracer, v, function) for v in items]
    finally:
        reset_tracer(token)
    default = ["output"] if len(outputs) == 1 else [f"output_{i}" for i in range(len(outputs))]
    output_names = [tracer.fresh(n) for n in default]
    ops = finish(tracer, outputs, output_names)
    name = function.__name__ if owner is None else type(owner).__name__
    init_net, predict_net = build_nets(name, tracer, names, ops, output_names)
    return Compiled(init_net, predict_net, names, kinds, isinstance(result, tuple))


def _output(tracer: Tracer, value: Any, function: ScriptFunction) -> TracedValue:
    if isinstance(value, TensorList) and value.stacked is not None:
        return value.stacked
    if is_runtime(value) or isinstance(value, (bool, int, float)):
        return materialize(tracer, value, "output")
    raise TypeError(
        f"{function.__name__} returns a {type(value).__name__}; script returns tensors, "
        "numbers, or a tuple of them"
    )


def script(obj: Any) -> Any:
    """Compiles a function, or a Module's forward, into NetDef control flow (If, Loop).

    Args:
        obj: a Python function written in the script subset, or a netbrew.nn Module.

    Returns:
        A callable running the compiled net on NumPy arrays (see ScriptFunction).

    Raises:
        ScriptError: listing every construct outside the subset, with file, line,
            column and what to write instead.
    """
    if isinstance(obj, (ScriptFunction, BoundScript)):
        return obj
    if isinstance(obj, Module):
        forward = type(obj).__dict__.get("forward") or type(obj).forward
        function = forward if isinstance(forward, ScriptFunction) else ScriptFunction(forward)
        return BoundScript(function, obj)
    return ScriptFunction(obj)


__all__ = ["BOOL", "FLOAT", "INT", "TENSOR", "BoundScript", "ScriptFunction", "script"]
