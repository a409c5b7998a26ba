"""The Net builder: ops are created by calling them on the net, Caffe2 style.

    >>> net = Net("mlp")
    >>> net.add_external_input("x", "w", "b")
    >>> h = net.Gemm(["x", "w", "b"], "h", transB=1)
    >>> y = h.Relu([], "y")
    >>> print(net)
    net mlp(x, w, b) -> ()
      h = Gemm(x, w, b, transB=1)
      y = Relu(h)

`net.Relu("x", "y")` checks the op type against the schema registry; an unknown type
raises UnknownOperatorError with the nearest names. String blob names are prefixed with
the active `name_scope`; BlobReferences are used as they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from netbrew.errors import UnknownOpAttributeError, UnknownOperatorError
from netbrew.netdef.args import args_dict, set_args
from netbrew.netdef.dtypes import normalize_type_args
from netbrew.netdef.scope import current_device, current_name_scope, device_name, parse_device
from netbrew.proto.netbrew_pb2 import DeviceOption, NetDef, OperatorDef

Blobs = "str | BlobReference | Sequence[str | BlobReference]"


class BlobReference(str):
    """A blob name that remembers its net, so ops can be chained: `x.Relu([], "y")`."""

    net: Net | None

    def __new__(cls, name: str, net: Net | None = None) -> BlobReference:
        ref = super().__new__(cls, name)
        ref.net = net
        return ref

    def __getattr__(self, op_type: str):
        if op_type.startswith("_") or self.net is None:
            raise AttributeError(op_type)
        make = getattr(self.net, op_type)

        def call(inputs=(), outputs=None, **kwargs):
            return make([self, *_as_list(inputs)], outputs, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"BlobReference({str(self)!r})"


def _as_list(blobs: Any) -> list:
    if blobs is None:
        return []
    if isinstance(blobs, str):
        return [blobs]
    return list(blobs)


def _scoped(name: str) -> str:
    return name if isinstance(name, BlobReference) or not name else current_name_scope() + name


# Caffe2's Net and ModelHelper methods -> netbrew's spelling, for the error on a native Net.
CAFFE2_METHODS = {
    "Proto": "proto()",
    "Name": "name",
    "AddExternalInput": "add_external_input()",
    "AddExternalInputs": "add_external_input()",
    "AddExternalOutput": "add_external_output()",
    "AddExternalOutputs": "add_external_output()",
    "AddGradientOperators": "add_gradient_operators() (ModelHelper) or "
    "netbrew.netdef.autodiff.add_gradient_ops(net, losses)",
    "Clone": "clone()",
    "RunAllOnGPU": "set_device() (or ModelHelper.run_all_on())",
}

# Every name a Net was given in this process, so that clones get fresh ones.
_NAMES_USED: set[str] = set()


def fresh_net_name(name: str) -> str:
    """`name` if no Net has had it yet, else the first free `name_1`, `name_2`, ...
    (as Caffe2 named its nets)."""
    if name not in _NAMES_USED:
        return name
    k = 1
    while f"{name}_{k}" in _NAMES_USED:
        k += 1
    return f"{name}_{k}"


class Net:
    """A NetDef under construction.

    Args:
        name_or_proto: a name for a new net, or a NetDef to wrap (copied).
    """

    def __init__(self, name_or_proto: str | NetDef = "net") -> None:
        if isinstance(name_or_proto, NetDef):
            self._net = NetDef()
            self._net.CopyFrom(name_or_proto)
        else:
            self._net = NetDef(name=name_or_proto)
        self._counter = itertools.count()
        _NAMES_USED.add(self._net.name)

    # -- building ---------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._net.name

    def __getattr__(self, op_type: str):
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        if op_type in CAFFE2_METHODS:
            raise AttributeError(
                f"Net has no attribute {op_type!r}: did you mean {CAFFE2_METHODS[op_type]}? "
                "(Caffe2's method names are on netbrew.caffe2.python.core.Net)"
            )
        from netbrew.operators import get_schema

        try:
            get_schema(op_type)
        except UnknownOperatorError as e:  # with near names; hasattr(net, ...) is False
            raise UnknownOpAttributeError(str(e)) from None

        def make(inputs=(), outputs=None, **kwargs):
            return self.add_op(op_type, inputs, outputs, **kwargs)

        make.__name__ = op_type
        return make

    def add_op(
        self,
        op_type: str,
        inputs: Any = (),
        outputs: Any = None,
        *,
        name: str | None = None,
        device: DeviceOption | str | None = None,
        engine: str | None = None,
        control_input: Iterable[str] = (),
        **args: Any,
    ) -> BlobReference | tuple[BlobReference, ...]:
        """Appends an op and returns its output blob(s).

        Args:
            op_type: a registered op type.
            inputs: input blob names; "" marks an omitted optional input.
            outputs: output names, or a count to name them automatically.
                None means the schema's minimum output count (at least one).
            name: the op's name.
            device: 'cpu', 'cuda:N' or a DeviceOption; defaults to the device scope.
            engine: preferred implementation.
            control_input: blobs that must be ready first.
            **args: the op's attributes.
        """
        from netbrew.operators import get_schema

        schema = get_schema(op_type)
        if outputs is None:
            outputs = max(1, schema.min_outputs)
        if isinstance(outputs, int):
            n = next(self._counter)
            stem = f"{current_name_scope()}{self.name or 'net'}_{op_type.lower()}_{n}"
            out_names = [stem] if outputs == 1 else [f"{stem}_{i}" for i in range(outputs)]
        else:
            out_names = [_scoped(o) for o in _as_list(outputs)]
        op = self._net.op.add(
            type=op_type,
            input=[_scoped(i) for i in _as_list(inputs)],
            output=out_names,
            control_input=[_scoped(c) for c in control_input],
        )
        if name:
            op.name = name
        if engine:
            op.engine = engine
        option = parse_device(device) if device is not None else current_device()
        if option is not None:
            op.device_option.CopyFrom(option)
        set_args(op, normalize_type_args(op_type, {k: v for k, v in args.items() if v is not None}))
        refs = tuple(BlobReference(o, self) for o in out_names)
        return refs[0] if len(refs) == 1 else refs

    def add_external_input(self, *names: str) -> list[BlobReference]:
        """Declares blobs the net reads but does not produce (feeds, parameters)."""
        return self._add_external(self._net.external_input, names)

    def add_external_output(self, *names: str) -> list[BlobReference]:
        """Declares blobs the net hands back to its caller."""
        return self._add_external(self._net.external_output, names)

    def _add_external(self, field, names) -> list[BlobReference]:
        refs = []
        for name in names:
            name = _scoped(name)
            if name not in field:
                field.append(name)
            refs.append(BlobReference(name, self))
        return refs

    @property
    def external_inputs(self) -> list[str]:
        return list(self._net.external_input)

    @property
    def external_outputs(self) -> list[str]:
        return list(self._net.external_output)

    @property
    def ops(self) -> Sequence[OperatorDef]:
        return self._net.op

    def set_device(self, device: DeviceOption | str | None) -> None:
        """Places the net's ops that have no device option of their own: 'cpu', 'cuda',
        'cuda:N' or a DeviceOption; None clears it."""
        if device is None:
            self._net.ClearField("device_option")
        else:
            self._net.device_option.CopyFrom(parse_device(device))

    def set_type(
        self, net_type: str, num_workers: int | None = None, adaptive: bool | None = None
    ) -> None:
        """Chooses the runtime ("simple", "dag"), its worker count, and whether `dag` may
        fall back to in-order runs when parallel ones measure slower (default: it may)."""
        self._net.type = net_type
        for name, value in (("num_workers", num_workers), ("adaptive", adaptive)):
            if value is None:
                continue
            for arg in self._net.arg:
                if arg.name == name:
                    arg.i = int(value)
                    break
            else:
                set_args(self._net, {name: int(value)})

    # -- views --------------------------------------------------------------------------

    def proto(self) -> NetDef:
        """The NetDef itself (not a copy): edits to it edit the net."""
        return self._net

    def clone(self, name: str | None = None) -> Net:
        """A deep copy under `name`, or under a fresh name (`<name>_1`, ...) when None, so
        that a workspace can hold the clone beside the original, as Caffe2's Clone did."""
        proto = NetDef()
        proto.CopyFrom(self._net)
        proto.name = name if name is not None else fresh_net_name(self._net.name)
        return Net(proto)

    def lint(self) -> None:
        """Checks the net; raises SchemaError listing every problem found."""
        from netbrew.netdef.lint import lint

        lint(self._net)

    def __str__(self) -> str:
        return format_net(self._net)

    def __repr__(self) -> str:
        return f"Net({self.name!r}, {len(self._net.op)} ops)"


def format_op(op: OperatorDef) -> str:
    """One line: `y = Relu(x)`, with arguments, name and non-CPU device."""
    args = [f"{k}={_short(v)}" for k, v in args_dict(op.arg).items()]
    outs = ", ".join(op.output) or "()"
    line = f"{outs} = {op.type}({', '.join([*map(_blob, op.input), *args])})"
    if op.name:
        line += f"  # {op.name}"
    if op.HasField("device_option") and op.device_option.device_type != 0:
        line += f"  @{device_name(op.device_option)}"
    return line


def format_net(net: NetDef, indent: str = "") -> str:
    """The whole net: a header line with its inputs and outputs, then one op per line. The
    subnets of an op (If's branches, Loop's and Scan's bodies) follow it, each indented one
    step further beneath its argument's name:

        net main(x, n) -> (y)
          y = Loop(n, <none>, x, body=<net body: 2 ops>)
            body:
              net body(i, cond, h) -> (cond_out, h_out)
                ...
    """
    head = f"{indent}net {net.name or '<unnamed>'}({', '.join(net.external_input)})"
    head += f" -> ({', '.join(net.external_output)})"
    lines = [head]
    for op in net.op:
        lines.append(f"{indent}  {format_op(op)}")
        for arg in op.arg:
            subnets = [arg.n] if arg.HasField("n") else list(arg.nets)
            for sub in subnets:
                lines.append(f"{indent}    {arg.name}:")
                lines.append(format_net(sub, indent + "      "))
    return "\n".join(lines)


def _blob(name: str) -> str:
    return name or "<none>"


def _short(value: Any) -> str:
    if isinstance(value, NetDef):
        return f"<net {value.name or 'subgraph'}: {len(value.op)} ops>"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        if value.size <= 4:
            return repr(value.tolist())
        return f"<{value.dtype}{list(value.shape)}>"
    if isinstance(value, list) and len(value) > 8:
        return f"[{', '.join(map(str, value[:8]))}, ... {len(value)} items]"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def op_def(
    op_type: str,
    inputs: Sequence[str] = (),
    outputs: Sequence[str] = (),
    *,
    name: str | None = None,
    device: DeviceOption | str | None = None,
    **args: Any,
) -> OperatorDef:
    """A standalone OperatorDef, as Caffe2's `core.CreateOperator`. Not checked here, but a
    type argument is stored in the form the NetDef keeps (netbrew.netdef.dtypes)."""
    op = OperatorDef(type=op_type, input=_as_list(inputs), output=_as_list(outputs))
    if name:
        op.name = name
    if device is not None:
        op.device_option.CopyFrom(parse_device(device))
    set_args(op, normalize_type_args(op_type, {k: v for k, v in args.items() if v is not None}))
    return op
