"""Reading a function for script mode: its AST, its argument types, and the static check
that reports every construct outside the subset at once."""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import textwrap
import types
from dataclasses import dataclass
from typing import Any

from netbrew.script.errors import Problem, ScriptError, Source

TENSOR, INT, FLOAT, BOOL = "tensor", "int", "float", "bool"
_ANNOTATIONS = {
    "Tensor": TENSOR,
    "ndarray": TENSOR,
    "Any": TENSOR,
    "int": INT,
    "float": FLOAT,
    "bool": BOOL,
}

# construct -> what to write instead
_STATEMENTS = {
    ast.Try: (
        "try statement",
        "handle the condition with tensor ops (F.where), or keep the "
        "try outside the scripted function",
    ),
    ast.With: ("with statement", "call the context manager outside the scripted function"),
    ast.Raise: ("raise statement", "check inputs before calling the scripted function"),
    ast.Assert: ("assert statement", "check inputs before calling the scripted function"),
    ast.Import: ("import", "import at module level"),
    ast.ImportFrom: ("import", "import at module level"),
    ast.Global: ("global statement", "pass the value as an argument"),
    ast.Nonlocal: ("nonlocal statement", "pass the value as an argument"),
    ast.Delete: ("del statement", "drop the del; unused values are freed"),
    ast.ClassDef: ("class definition", "define the class at module level"),
    ast.FunctionDef: ("nested function", "define it at module level; calls to it are inlined"),
    ast.AsyncFunctionDef: ("async function", "use a plain function"),
    ast.Continue: ("continue statement", "put the rest of the loop body under an if"),
}
_EXPRESSIONS = {
    ast.Lambda: ("lambda", "define a function at module level"),
    ast.Dict: ("dict literal", "use separate variables or a tuple"),
    ast.Set: ("set literal", "use a tuple"),
    ast.ListComp: ("list comprehension", "append to a list in a for loop"),
    ast.SetComp: ("set comprehension", "append to a list in a for loop"),
    ast.DictComp: ("dict comprehension", "use separate variables, or a list appended in a loop"),
    ast.GeneratorExp: ("generator expression", "append to a list in a for loop"),
    ast.Yield: ("yield", "return a tuple, or stack per-step values into a tensor"),
    ast.YieldFrom: ("yield from", "return a tuple"),
    ast.Await: ("await", "script synchronous code only"),
    ast.JoinedStr: ("f-string", "strings are only allowed as constant arguments"),
    ast.NamedExpr: ("assignment expression (:=)", "assign in a statement of its own"),
    ast.Starred: ("starred expression", "pass the arguments one by one"),
}
_ALLOWED_MODULES = ("netbrew.nn", "netbrew.script", "math")
_ALLOWED_BUILTINS = {"range", "len", "float", "int", "bool", "min", "max", "abs"}


@dataclass
class Parsed:
    """A function read for script mode."""

    fn: Any
    tree: ast.FunctionDef
    source: Source
    arg_names: list[str]
    arg_types: dict[str, str]

    def resolve(self, name: str) -> Any:
        """A free name of the function: its closure, then its globals, then builtins."""
        code = self.fn.__code__
        if name in code.co_freevars and self.fn.__closure__:
            cell = self.fn.__closure__[code.co_freevars.index(name)]
            return cell.cell_contents
        if name in self.fn.__globals__:
            return self.fn.__globals__[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(name)


def parse(fn: Any) -> Parsed:
    """Reads `fn`'s source and checks it; raises ScriptError listing every problem."""
    fn = inspect.unwrap(fn)
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"script expects a Python function or a Module, got {type(fn).__name__}")
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise TypeError(f"script needs the source of {fn.__qualname__!r}: {e}") from e
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(text.splitlines()[0]) - len(dedented.splitlines()[0])
    module = ast.parse(dedented)
    ast.increment_lineno(module, start - 1)
    tree = next(n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    source = Source(inspect.getsourcefile(fn) or "<unknown>", fn.__qualname__, indent)
    problems: list[Problem] = []
    if isinstance(tree, ast.AsyncFunctionDef):
        problems.append(source.problem(tree, "async function", "use a plain function"))
    names, arg_types = _arguments(tree, source, problems)
    parsed = Parsed(fn, tree, source, names, arg_types)
    _Checker(parsed, problems).check(tree)
    if problems:
        raise ScriptError(fn.__qualname__, problems)
    return parsed


def _arguments(tree, source: Source, problems: list[Problem]) -> tuple[list[str], dict]:
    a = tree.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        problems.append(
            source.problem(
                tree, "*args, **kwargs or keyword-only arguments", "list each argument by name"
            )
        )
    types_: dict[str, str] = {}
    for arg in a.args:
        types_[arg.arg] = _annotation(arg, source, problems)
    return [arg.arg for arg in a.args], types_


def _annotation(arg: ast.arg, source: Source, problems: list[Problem]) -> str:
    node = arg.annotation
    if node is None:
        return TENSOR
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value.rsplit(".", 1)[-1]
    elif isinstance(node, ast.Name):
        name = node.id
    elif isinstance(node, ast.Attribute):
        name = node.attr
    else:
        name = ast.unparse(node)
    if name not in _ANNOTATIONS:
        problems.append(
            source.problem(
                node,
                f"annotation {ast.unparse(node)!r} of argument {arg.arg!r}",
                "annotate with Tensor, int, float or bool (unannotated is Tensor)",
            )
        )
        return TENSOR
    return _ANNOTATIONS[name]


def _library(value: Any) -> str | None:
    """The library a called object belongs to, when script cannot record it; else None."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
    elif isinstance(value, types.BuiltinFunctionType) and value.__module__ == "builtins":
        return None if value.__name__ in _ALLOWED_BUILTINS else "builtins"
    elif isinstance(value, type) and value.__module__ == "builtins":
        return None if value.__name__ in _ALLOWED_BUILTINS else "builtins"
    else:
        module = getattr(value, "__module__", None) or ""
        if isinstance(value, types.FunctionType) and not _is_library(module):
            return None
    if module.startswith(_ALLOWED_MODULES) or not _is_library(module):
        return None
    return module.split(".")[0]


def _is_library(module: str) -> bool:
    root = module.split(".")[0]
    if root == "netbrew":
        return not module.startswith(_ALLOWED_MODULES)
    if root in sys.stdlib_module_names:
        return True
    mod = sys.modules.get(root)
    path = getattr(mod, "__file__", "") or ""
    return "site-packages" in path or "dist-packages" in path


class _Checker(ast.NodeVisitor):
    """Collects every construct outside the subset (the statically visible ones)."""

    def __init__(self, parsed: Parsed, problems: list[Problem]) -> None:
        self.parsed = parsed
        self.problems = problems
        self.locals = set(parsed.arg_names) | {
            n.id
            for n in ast.walk(parsed.tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        self.loops = 0

    def report(self, node: ast.AST, construct: str, hint: str) -> None:
        self.problems.append(self.parsed.source.problem(node, construct, hint))

    def check(self, tree: ast.FunctionDef) -> None:
        for stmt in tree.body:
            self.visit(stmt)

    def generic_visit(self, node: ast.AST) -> None:
        kind = _STATEMENTS.get(type(node)) or _EXPRESSIONS.get(type(node))
        if kind is not None:
            self.report(node, *kind)
            return
        super().generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if not isinstance(node.target, (ast.Name, ast.Tuple)):
            self.report(node.target, "for loop target", "loop over range(n) with one name")
        if node.orelse:
            self.report(node.orelse[0], "for-else", "set a flag before break and test it after")
        self.visit(node.iter)
        self._loop(node)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            self.report(node.orelse[0], "while-else", "set a flag before break and test it after")
        self._loop(node)

    def _loop(self, node: ast.For | ast.While) -> None:
        self.loops += 1
        for stmt in node.body:
            self.visit(stmt)
        self.loops -= 1

    def visit_Break(self, node: ast.Break) -> None:
        if not self.loops:
            self.report(node, "break outside a loop", "remove it")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target)
        self.visit(node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target)
        self.visit(node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._target(node.target)
        if node.value is not None:
            self.visit(node.value)

    def _target(self, target: ast.expr) -> None:
        if isinstance(target, ast.Name):
            return
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            return
        if isinstance(target, ast.Subscript):
            self.report(target, "item assignment", "build the new tensor with F.where or F.cat")
        elif isinstance(target, ast.Attribute):
            self.report(target, "attribute assignment", "return the new value instead")
        else:
            self.report(target, f"assignment to {ast.unparse(target)!r}", "assign to names")

    def visit_Call(self, node: ast.Call) -> None:
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.locals:
            try:
                value = self.parsed.resolve(root.id)
            except NameError:
                self.report(root, f"unknown name {root.id!r}", "define it or pass it in")
                value = None
            else:
                self._callee(node, value)
        self.generic_visit(node)

    def _callee(self, node: ast.Call, root: Any) -> None:
        value = root
        if isinstance(node.func, ast.Attribute):
            path = []
            f = node.func
            while isinstance(f, ast.Attribute):
                path.append(f.attr)
                f = f.value
            for attr in reversed(path):
                value = getattr(value, attr, None)
        library = _library(value if value is not None else root)
        if library is not None:
            call = ast.unparse(node.func)
            self.report(
                node,
                f"call to {call} ({library})",
                "script records netbrew.nn.functional, tensor methods, submodules "
                "and Python functions; use netbrew.nn.functional",
            )
