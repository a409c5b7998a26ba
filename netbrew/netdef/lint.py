"""Static checks of a NetDef, reported all at once."""

from __future__ import annotations

from netbrew.errors import NetbrewError, SchemaError
from netbrew.proto.netbrew_pb2 import NetDef


def lint_problems(net: NetDef) -> list[str]:
    """Every problem in `net`, one message each; empty when it is clean.

    Checks that each op type is registered, input and output counts and argument
    names match the schema, every input is an external input or produced by an earlier
    op, in-place writes happen only where the schema allows them, and every external
    output is produced.
    """
    from netbrew.netdef.args import args_dict
    from netbrew.operators import get_schema

    problems: list[str] = []
    defined = set(net.external_input)
    for index, op in enumerate(net.op):
        where = f"op #{index} {op.type}" + (f" {op.name!r}" if op.name else "")
        try:
            schema = get_schema(op.type)
            schema.check_arity(len(op.input), len(op.output), where)
            schema.parse_attrs(args_dict(op.arg), where)
        except NetbrewError as e:
            problems.append(str(e))
            schema = None
        for blob in list(op.input) + list(op.control_input):
            if blob and blob not in defined:
                problems.append(
                    f"{where}: input {blob!r} was used before it has been defined "
                    "(declare it with add_external_input or produce it earlier)"
                )
        if schema is not None:
            for o, out in enumerate(op.output):
                for i, inp in enumerate(op.input):
                    if out and out == inp and schema.inplace_output(i) != o:
                        problems.append(
                            f"{where}: writes input {i} ({inp!r}) in place as output {o}, "
                            f"which {op.type} does not allow"
                        )
                        break
        defined.update(o for o in op.output if o)
    for blob in net.external_output:
        if blob not in defined:
            problems.append(f"external output {blob!r} is never produced")
    return problems


def lint(net: NetDef) -> None:
    """Raises SchemaError listing every problem `lint_problems` finds."""
    problems = lint_problems(net)
    if problems:
        body = "\n  ".join(problems)
        raise SchemaError(f"net {net.name!r} has {len(problems)} problem(s):\n  {body}")
