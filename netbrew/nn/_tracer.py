"""Recording netbrew.nn calls as OperatorDefs: the Tracer and the values it hands out.

While a Tracer is active (see `netbrew.converters.module.trace`), every op that
`netbrew.nn._dispatch.call` sees is appended to the tracer's op list, and its results are
TracedValues: a blob name plus the example value the op computed. Modules hand out their
parameters and buffers as TracedValues named after their path (`layer1.0.conv1.weight`),
so the recorded ops read those blobs.

A TracedValue behaves like the NumPy array it stands for: shapes, dtypes, arithmetic,
comparisons, indexing and the common ndarray methods record ops. What cannot be recorded
is a conversion to a Python value (bool, int, float, item()): it returns the example
value, records nothing and warns with TracerWarning, so Python control flow on data is
frozen to the branch the example took.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from netbrew.errors import NetbrewError
from netbrew.netdef.args import set_args
from netbrew.nn import _ops
from netbrew.nn._dispatch import call, eager_op, generator
from netbrew.proto.netbrew_pb2 import OperatorDef


class TracingError(NetbrewError, RuntimeError):
    """Something a trace cannot record (a value from another trace, an unregistered
    parameter, an in-place write to a value that is not module state...)."""


class TracerWarning(UserWarning):
    """A traced value became a Python value: the example's value is baked into the net."""


class TracedValue:
    """A blob of the net being traced, with the example value computed for it.

    Attributes:
        name: the blob name.
        value: the example value (an ndarray), used for shapes and Python conversions.
    """

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NumPy ufuncs on traced values (np.exp(x), array + x) record the matching op."""
        op = _UFUNCS.get(ufunc)
        if op is None or method != "__call__" or kwargs:
            raise TypeError(
                f"np.{ufunc.__name__} ({method}{', ' + ', '.join(kwargs) if kwargs else ''}) on "
                f"traced value {self.name!r} cannot be recorded; use netbrew.nn.functional or "
                f"one of the ufuncs traced values support: {', '.join(sorted(_UFUNC_NAMES))}"
            )
        return op(*inputs)

    def __init__(self, tracer: Tracer, name: str, value: Any, state: str | None = None) -> None:
        self.tracer = tracer
        self.name = name
        self.value = np.asarray(value)
        self.state = state  # the parameter or buffer blob this value is the current value of

    # -- what NumPy code reads ------------------------------------------------------------

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype)
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)
    T = property(lambda self: _ops.permute(self, ()))

    def __len__(self) -> int:
        if not self.value.ndim:
            raise TypeError("len() of a 0-d traced value")
        return self.value.shape[0]

    def __iter__(self) -> Iterator[TracedValue]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"TracedValue({self.name!r}, {self.dtype}{list(self.shape)})"

    __hash__ = object.__hash__

    # -- Python conversions: evaluated on the example, not recorded ------------------------

    def _concrete(self, kind: str) -> np.ndarray:
        warnings.warn(
            TracerWarning(
                f"converting traced value {self.name!r} to a Python {kind}: the example's "
                f"value is used and baked into the traced net (nothing is recorded for it), so "
                "control flow that depends on it takes the branch seen while tracing"
            ),
            stacklevel=3,
        )
        return self.value

    def __bool__(self) -> bool:
        return bool(self._concrete("bool"))

    def __float__(self) -> float:
        return float(self._concrete("float"))

    def __int__(self) -> int:
        return int(self._concrete("int"))

    def __index__(self) -> int:
        return int(self._concrete("int").__index__())

    def item(self) -> Any:
        return self._concrete("number").item()

    def tolist(self) -> Any:
        return self._concrete("list").tolist()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            f"traced value {self.name!r} cannot become a NumPy array while tracing: NumPy "
            "functions (np.exp, np.asarray, ...) are not recorded. Use netbrew.nn.functional "
            "or the value's own methods; float(value) gives the example's number"
        )

    def assign_(self, value: Any) -> None:
        """In-place write: the traced net writes this parameter or buffer blob."""
        self.tracer.assign(self, value)

    # -- arithmetic and comparisons --------------------------------------------------------

    def __add__(self, other):
        return _ops.binary("Add", self, other)

    def __radd__(self, other):
        return _ops.binary("Add", other, self)

    def __sub__(self, other):
        return _ops.binary("Sub", self, other)

    def __rsub__(self, other):
        return _ops.binary("Sub", other, self)

    def __mul__(self, other):
        return _ops.binary("Mul", self, other)

    def __rmul__(self, other):
        return _ops.binary("Mul", other, self)

    def __truediv__(self, other):
        return _ops.true_divide(self, other)

    def __rtruediv__(self, other):
        return _ops.true_divide(other, self)

    def __matmul__(self, other):
        return _ops.binary("MatMul", self, other)

    def __rmatmul__(self, other):
        return _ops.binary("MatMul", other, self)

    def __pow__(self, other):
        return _ops.binary("Pow", self, other)

    def __rpow__(self, other):
        return _ops.binary("Pow", other, self)

    def __neg__(self):
        return call("Neg", [self])

    def __pos__(self):
        return self

    def __abs__(self):
        return call("Abs", [self])

    def __gt__(self, other):
        return _ops.binary("Greater", self, other)

    def __lt__(self, other):
        return _ops.binary("Less", self, other)

    def __ge__(self, other):
        return _ops.binary("GreaterOrEqual", self, other)

    def __le__(self, other):
        return _ops.binary("LessOrEqual", self, other)

    def __eq__(self, other):  # type: ignore[override]
        return _ops.binary("Equal", self, other)

    def __ne__(self, other):  # type: ignore[override]
        return call("Not", [_ops.binary("Equal", self, other)])

    def __getitem__(self, index: Any) -> TracedValue:
        return _ops.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TracingError(
            f"item assignment on traced value {self.name!r} cannot be recorded; build the "
            "result with ops (e.g. F.cat) instead"
        )

    # -- ndarray methods ---------------------------------------------------------------------

    def reshape(self, *shape: Any) -> TracedValue:
        return _ops.reshape(self, shape)

    def transpose(self, *axes: Any) -> TracedValue:
        return _ops.permute(self, axes)

    def flatten(self) -> TracedValue:
        return _ops.reshape(self, (-1,))

    ravel = flatten

    def squeeze(self, axis: Any = None) -> TracedValue:
        if axis is None:
            axis = [i for i, d in enumerate(self.shape) if d == 1]
        axes = [axis] if isinstance(axis, int) else list(axis)
        return call("Squeeze", [self, _ops.const(axes)])

    def astype(self, dtype: Any) -> TracedValue:
        return _ops.cast(self, dtype)

    def sum(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        return _ops.reduce("ReduceSum", self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        return _ops.reduce("ReduceMean", self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        return _ops.reduce("ReduceMax", self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> TracedValue:
        return _ops.reduce("ReduceMin", self, axis, keepdims)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> TracedValue:
        return _ops.argmax(self, axis, keepdims)


def _unary(op_type: str):
    return lambda x: call(op_type, [x])


def _binary(op_type: str):
    return lambda a, b: _ops.binary(op_type, a, b)


_UFUNCS = {
    np.add: _binary("Add"),
    np.subtract: _binary("Sub"),
    np.multiply: _binary("Mul"),
    np.true_divide: _ops.true_divide,
    np.matmul: _binary("MatMul"),
    np.power: _binary("Pow"),
    np.maximum: _binary("Max"),
    np.minimum: _binary("Min"),
    np.greater: _binary("Greater"),
    np.less: _binary("Less"),
    np.greater_equal: _binary("GreaterOrEqual"),
    np.less_equal: _binary("LessOrEqual"),
    np.equal: _binary("Equal"),
    np.negative: _unary("Neg"),
    np.absolute: _unary("Abs"),
    np.exp: _unary("Exp"),
    np.log: _unary("Log"),
    np.sqrt: _unary("Sqrt"),
    np.tanh: _unary("Tanh"),
    np.sin: _unary("Sin"),
    np.cos: _unary("Cos"),
    np.floor: _unary("Floor"),
    np.ceil: _unary("Ceil"),
    np.sign: _unary("Sign"),
    np.reciprocal: _unary("Reciprocal"),
}
_UFUNC_NAMES = {f.__name__ for f in _UFUNCS}


class Tracer:
    """Records ops into a list of OperatorDefs while a module runs.

    Args:
        root: the module being traced; its parameters and buffers (by object identity)
            become blobs named by their dotted paths.
        reserved: names (inputs, outputs) no recorded blob may take.
    """

    def __init__(self, root: Any, reserved: Iterable[str] = ()) -> None:
        self.ops: list[OperatorDef] = []
        self.taken: set[str] = set(reserved)
        self.paths = {id(m): path for path, m in root.named_modules()}
        self.state: dict[str, TracedValue] = {}
        self.state_arrays: dict[str, np.ndarray] = {}
        self._state_by_id: dict[int, str] = {}
        for name, array in [*root.named_parameters(), *root.named_buffers()]:
            self._add_state(name, array)
        self.inputs: dict[str, TracedValue] = {}
        self.constants: dict[str, np.ndarray] = {}
        self._const_keys: dict[tuple, str] = {}
        self.updates: dict[str, str] = {}  # state blob -> blob holding its final value
        self._scopes: list[str] = []

    def _add_state(self, name: str, array: np.ndarray) -> None:
        if name in self.taken:
            raise TracingError(f"parameter or buffer {name!r} has the name of an input or output")
        self.taken.add(name)
        self.state[name] = TracedValue(self, name, array, state=name)
        self.state_arrays[name] = array
        self._state_by_id[id(array)] = name

    def fresh(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`... whichever is free; marks it taken."""
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    def add_input(self, name: str, value: np.ndarray) -> TracedValue:
        self.inputs[name] = TracedValue(self, name, value)
        return self.inputs[name]

    @contextlib.contextmanager
    def scope(self, module: Any) -> Iterator[None]:
        """Names the blobs recorded inside `module` after its path."""
        path = self.paths.get(id(module), self._scopes[-1] if self._scopes else "")
        self._scopes.append(path)
        try:
            yield
        finally:
            self._scopes.pop()

    @contextlib.contextmanager
    def name_scope(self, hint: str) -> Iterator[None]:
        """Names the blobs recorded inside after `hint` (a script variable) within the
        current module's path."""
        parent = self._scopes[-1] if self._scopes else ""
        self._scopes.append(f"{parent}.{hint}" if parent else hint)
        try:
            yield
        finally:
            self._scopes.pop()

    def owns(self, value: Any) -> bool:
        return isinstance(value, TracedValue) and value.tracer is self

    # -- state -------------------------------------------------------------------------------

    def _state_name(self, array: Any, what: str) -> str:
        name = self._state_by_id.get(id(array))
        if name is None:
            raise TracingError(
                f"{what} is not a parameter or buffer of the traced module; register its "
                "module as an attribute, or in a ModuleList/ModuleDict, so that it becomes a blob"
            )
        return name

    def read_state(self, module: Any, attr: str, array: Any) -> TracedValue:
        """The current traced value of `module.attr` (a parameter or buffer)."""
        where = f"{type(module).__name__}.{attr}"
        return self.state[self._state_name(array, where)]

    def assign_state(self, module: Any, attr: str, value: TracedValue) -> None:
        """`module.attr = value` for a buffer: the net writes the buffer's blob."""
        array = module.__dict__["_buffers"][attr]
        self.assign(self.state[self._state_name(array, f"buffer {attr!r}")], value)

    def assign(self, target: TracedValue, value: Any) -> None:
        if not self.owns(target) or target.state is None:
            raise TracingError(
                f"in-place write to {getattr(target, 'name', target)!r}, which is not a "
                "parameter or buffer of the traced module"
            )
        new = self.as_value(value)
        old = self.state[target.state]
        if new.shape != old.shape or new.dtype != old.dtype:
            raise TracingError(
                f"in-place write to {target.state!r}: got {new.dtype}{list(new.shape)}, "
                f"expected {old.dtype}{list(old.shape)}"
            )
        self.state[target.state] = TracedValue(self, new.name, new.value, state=target.state)
        self.updates[target.state] = new.name

    # -- recording ---------------------------------------------------------------------------

    def as_value(self, x: Any) -> TracedValue:
        """A TracedValue for an op input: traced values as they are, parameters and buffers
        as their blobs, any other array or number as a constant filled by the init net."""
        if isinstance(x, TracedValue):
            if x.tracer is not self:
                raise TracingError(f"traced value {x.name!r} comes from another trace")
            return x
        if isinstance(x, np.ndarray) and id(x) in self._state_by_id:
            return self.state[self._state_by_id[id(x)]]
        if isinstance(x, np.ndarray) or np.isscalar(x):
            return self.constant(np.asarray(x))
        raise TypeError(f"cannot use a {type(x).__name__} as an op input while tracing")

    def constant(self, value: np.ndarray, hint: str = "const") -> TracedValue:
        """A constant blob named `hint` within the current module's path (small equal
        constants of one module and hint share one blob)."""
        scope = self._scopes[-1] if self._scopes else ""
        small = value.size <= 64
        key = (scope, hint, value.dtype.str, value.shape, value.tobytes()) if small else None
        name = self._const_keys.get(key) if key else None
        if name is None:
            name = self.fresh(f"{scope}.{hint}" if scope else hint)
            self.constants[name] = np.array(value)
            if key:
                self._const_keys[key] = name
        return TracedValue(self, name, self.constants[name])

    def record(self, op_type: str, inputs: list, num_outputs: int, attrs: dict) -> tuple:
        """Appends one op; computes its example outputs with the eager kernel."""
        ins = [None if x is None else self.as_value(x) for x in inputs]
        op = eager_op(op_type, len(ins), num_outputs, attrs)
        results = op.run([None if v is None else v.value for v in ins])
        base = (self._scopes[-1] if self._scopes else "") or op_type.lower()
        outs = tuple(TracedValue(self, self.fresh(base), r) for r in results)
        proto = OperatorDef(
            type=op_type,
            input=["" if v is None else v.name for v in ins],
            output=[o.name for o in outs],
        )
        if op.schema.rng and attrs.get("seed") is None:
            # a seed from netbrew.nn's stream: nets traced after manual_seed(s) repeat
            attrs = {**attrs, "seed": int(generator().integers(2**31 - 1))}
        set_args(proto, {k: v for k, v in attrs.items() if v is not None})
        self.ops.append(proto)
        return outs
