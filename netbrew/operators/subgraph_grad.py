"""Backward subgraphs for the ops that run subgraphs (If, Loop, Scan, SequenceMap).

`vjp_net(net, seeded, wrt)` differentiates a subgraph with netbrew's own autodiff, as
attention_flex_grad does for FlexAttention's modifiers: a copy of `net` followed by
add_gradient_ops, seeded with new formal inputs dY_k for the outputs listed in `seeded`,

    (net's formal inputs..., dY for each seeded output) -> (d wrt_j for each wrt_j reached)

where `wrt` names formal inputs of `net` or outer-scope blobs it reads (captured_reads).
The copy recomputes the subgraph's forward ops, so a gradient kernel replays each branch,
iteration or element from its inputs instead of keeping the forward's intermediate values.
A wrt blob that no seeded output depends on gets no output (`Vjp.has` says which do); the
kernels fill zeros for those. Because of the replay, a random op (schema rng) feeding a
seeded output is refused: it would draw other values than the forward did.

The gradient kernels build these subgraphs when they run, once per subgraph, seeded
outputs and wrt blobs (cached), because only then do they know which loop-carried values,
scan inputs or captured blobs are floats: an integer counter carried through a Loop must
get no gradient. The makers call `check_vjp` with every slot that may be differentiated,
so an op without a gradient inside a subgraph is reported when the gradient is built.

Value helpers for tensors, sequences (lists) and empty optionals (None): is_float,
zeros_like, accumulate; and the bookkeeping the makers and kernels share: captured_wanted
(which captured blobs autodiff wants gradients of), captured_values, summed, scattered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netbrew.errors import BlobNotFoundError, SchemaError
from netbrew.netdef.autodiff import add_gradient_ops, captured_reads
from netbrew.netdef.net import op_def
from netbrew.operators.schema import DTYPE_CLASSES, SCHEMAS
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

_CACHE: dict[tuple, tuple[NetDef, Vjp]] = {}
_MAX_CACHED = 1024


@dataclass(frozen=True)
class Vjp:
    """A backward subgraph and, for each wrt blob, whether it is among its outputs."""

    net: NetDef
    has: tuple[bool, ...]

    def unpack(self, outputs: Sequence[Any]) -> list[Any]:
        """The subgraph's outputs spread over the wrt slots, None where it has none."""
        given = iter(outputs)
        return [next(given) if has else None for has in self.has]


def vjp_net(net: NetDef, seeded: Sequence[int], wrt: Sequence[str], what: str) -> Vjp:
    """The backward subgraph of `net` (see the module doc), cached per NetDef object.

    Args:
        net: the forward subgraph.
        seeded: indices of its outputs whose gradients the backward subgraph takes.
        wrt: formal inputs of `net` or outer-scope blobs it reads.
        what: names the subgraph in errors, e.g. "Loop body".

    Raises:
        SchemaError: an op on a path from `wrt` to a seeded output has no gradient.
    """
    key = (id(net), tuple(seeded), tuple(wrt))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is net:
        return hit[1]
    vjp = _build(net, seeded, wrt, what)
    if len(_CACHE) >= _MAX_CACHED:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (net, vjp)  # holding `net` keeps its id from being reused
    return vjp


def check_vjp(net: NetDef, seeded: Sequence[int], wrt: Sequence[str], what: str) -> None:
    """Builds (without caching) the backward subgraph, for the error it may raise."""
    _build(net, seeded, wrt, what)


def _build(net: NetDef, seeded: Sequence[int], wrt: Sequence[str], what: str) -> Vjp:
    for k in seeded:
        if not 0 <= k < len(net.external_output):
            raise SchemaError(
                f"{what}: output {k} is asked for, but it yields {len(net.external_output)} outputs"
            )
    _check_deterministic(net, seeded, what)
    back = NetDef()
    back.CopyFrom(net)
    used = _names(net)
    dys, seeds = [], {}
    for k in seeded:
        y = net.external_output[k]
        dy = _fresh(used, f"{y}_vjp_dy")
        dys.append(dy)
        if y in seeds:  # one blob yields several outputs: their gradients add up
            total = _fresh(used, f"{y}_vjp_dy_sum")
            back.op.append(op_def("Sum", [seeds[y], dy], [total]))
            seeds[y] = total
        else:
            seeds[y] = dy
    try:
        grads = add_gradient_ops(back, list(seeds), wrt=list(wrt), seeds=seeds)
    except SchemaError as e:
        raise SchemaError(f"{what}: {e}") from None
    back.name = f"{net.name or 'subgraph'}_vjp"
    back.external_input[:] = [*net.external_input, *dys]
    back.external_output[:] = [grads[w] for w in wrt if w in grads]
    return Vjp(back, tuple(w in grads for w in wrt))


def _draws_random(op: OperatorDef) -> bool:
    """Whether `op`, or an op in its subgraphs, draws random numbers (schema rng)."""
    spec = SCHEMAS.get(op.type)
    if spec is not None and spec.rng:
        return True
    nets = [n for arg in op.arg for n in ([arg.n] if arg.HasField("n") else arg.nets)]
    return any(_draws_random(inner) for net in nets for inner in net.op)


def _check_deterministic(net: NetDef, seeded: Sequence[int], what: str) -> None:
    """Refuses a random op that feeds a seeded output: the gradient replays the subgraph,
    whose random streams would then draw other values than the forward did."""
    feeds = {net.external_output[k] for k in seeded}
    for index in reversed(range(len(net.op))):
        op = net.op[index]
        if not feeds.intersection(op.output):
            continue
        if _draws_random(op):
            raise SchemaError(
                f"{what}: op #{index} {op.type} draws random numbers, and the gradient "
                "replays the subgraph, which would draw different ones; draw them outside "
                "and read them by name"
            )
        feeds.update(op.input, captured_reads(op))


def _names(net: NetDef) -> set[str]:
    """Every blob name `net` uses, with those its nested subgraphs read from it."""
    used = set(net.external_input) | set(net.external_output)
    for op in net.op:
        used.update(op.input, op.output, captured_reads(op))
    return used


def _fresh(used: set[str], base: str) -> str:
    """A name not in `used` (which it joins), from `base`."""
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    used.add(name)
    return name


def is_float(value: Any) -> bool:
    """Whether `value` can carry a gradient: a float tensor, or a non-empty sequence of
    them (an empty optional, None, and integer or bool tensors cannot)."""
    if value is None:
        return False
    if isinstance(value, list):
        return bool(value) and all(is_float(v) for v in value)
    return DTYPE_CLASSES["float"](np.asarray(value).dtype)


def zeros_like(value: Any) -> Any:
    """The zero gradient of `value`: zeros of its shape and dtype, a list of those for a
    sequence, None for an empty optional."""
    if value is None:
        return None
    if isinstance(value, list):
        return [zeros_like(v) for v in value]
    return np.zeros_like(np.asarray(value))


def accumulate(total: Any, value: Any, what: str) -> Any:
    """total + value for gradients (tensors, or sequences added element by element);
    a None total is empty."""
    if total is None:
        return value
    if isinstance(total, list) or isinstance(value, list):
        if not (isinstance(total, list) and isinstance(value, list)) or len(total) != len(value):
            raise SchemaError(
                f"{what}: gradients to add do not match ({_kind(total)} and {_kind(value)})"
            )
        return [accumulate(a, b, what) for a, b in zip(total, value)]
    return np.add(total, value)


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return f"a sequence of {len(value)}"
    return f"a tensor of shape {list(np.shape(value))}"


def padded(names: Sequence[Any], count: int) -> list[Any]:
    """`names` extended with None to `count` entries (autodiff's g_out lists only the
    outputs the op names; check_gradient's g_in only the declared inputs)."""
    return [*names, *[None] * (count - len(names))]


def captured_wanted(op: OperatorDef, g_in: Sequence[str | None]) -> list[tuple[str, str]]:
    """(outer blob, gradient name) for each captured blob whose gradient autodiff wants."""
    captured = captured_reads(op)
    grads = padded(g_in, len(op.input) + len(captured))[len(op.input) :]
    return [(blob, g) for blob, g in zip(captured, grads) if g]


def captured_values(wrt: Sequence[str], scope: Mapping[str, Any], op: str) -> list[Any]:
    """The values of the captured blobs `wrt`, read from the scope the op runs in."""
    try:
        return [scope[blob] for blob in wrt]
    except KeyError:
        missing = next(b for b in wrt if b not in scope)
        raise BlobNotFoundError(
            f"{op}: captured blob {missing!r} (read by the forward's subgraph) is not in scope"
        ) from None


def or_zeros(grad: Any, value: Any) -> Any:
    """`grad`, or the zero gradient of `value` where there is none (None)."""
    return zeros_like(value) if grad is None else grad


def summed(rest: Sequence[list[Any]], first: int, values: Sequence[Any], what: str) -> list:
    """Per value, the sum over iterations of its slot (from `first` on) in `rest`."""
    totals: list[Any] = [None] * len(values)
    for got in rest:
        for c, g in enumerate(got[first : first + len(values)]):
            if g is not None:
                totals[c] = accumulate(totals[c], g, what)
    return [or_zeros(t, v) for t, v in zip(totals, values)]


def scattered(floats: Sequence[int], grads: Sequence[Any], values: Sequence[Any]) -> list:
    """Gradients of all `values`: grads[i] for index floats[i], zeros for the others."""
    by_index = dict(zip(floats, grads))
    return [or_zeros(by_index.get(j), v) for j, v in enumerate(values)]
