"""ScriptError: every place a scripted function leaves the subset, with what to write instead."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from netbrew.errors import NetbrewError


@dataclass(frozen=True)
class Problem:
    """One offending place: where it is, what the construct is, and what to write instead."""

    file: str
    line: int
    column: int
    construct: str
    hint: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.construct}: {self.hint}"


class ScriptError(NetbrewError, SyntaxError):
    """Python that `netbrew.script` cannot compile. The message lists every problem found,
    one per line as `file:line:column: construct: what to write instead`.

    Attributes:
        problems: the Problems, in source order.
    """

    def __init__(self, function: str, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column))
        self.function = function
        first = self.problems[0]
        count = f"{len(self.problems)} problems" if len(self.problems) > 1 else "1 problem"
        body = "\n  ".join(str(p) for p in self.problems)
        super().__init__(f"cannot script {function!r} ({count}):\n  {body}")
        # SyntaxError's fields, so tracebacks and IDEs point at the first problem
        self.filename, self.lineno, self.offset = first.file, first.line, first.column

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Source:
    """Where a function's parsed AST came from, to turn node positions into file positions."""

    file: str
    function: str
    indent: int  # columns removed by dedenting the source

    def problem(self, node: ast.AST, construct: str, hint: str) -> Problem:
        line = getattr(node, "lineno", 0)
        column = getattr(node, "col_offset", 0) + self.indent + 1
        return Problem(self.file, line, column, construct, hint)

    def error(self, node: ast.AST, construct: str, hint: str) -> ScriptError:
        return ScriptError(self.function, [self.problem(node, construct, hint)])
