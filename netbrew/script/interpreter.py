"""The script interpreter: walks a function's statements and lowers them into the blocks
of a Tracer (the top-level op list, or a subnet's while an If or Loop is built).

Compile-time Python (numbers, tuples, modules, `if` on a constant) runs as Python; every
tensor operation is recorded. Control flow on runtime values is lowered by control.py.
"""

from __future__ import annotations

import ast
import warnings
from typing import Any

from netbrew.nn import functional as F
from netbrew.nn._tracer import TracedValue, Tracer, TracerWarning
from netbrew.nn.module import Module
from netbrew.script import control
from netbrew.script.errors import ScriptError
from netbrew.script.expressions import (
    _BINOPS,
    _COMPARE,
    ShapeOf,
    Undefined,
    as_bool,
    binary,
    boolean,
    call_builtin,
    constant_number,
    dim,
    getitem,
    is_functional,
    is_user_function,
    stack_list,
)
from netbrew.script.source import Parsed, parse
from netbrew.script.values import TensorList, is_runtime, kind_of, with_kind

_CASTS = (int, float, bool)


def _is_range(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
    )


class Returned:
    """The value of a `return` that ended a block."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Interpreter:
    """Lowers one function body. `env` maps its variable names to values."""

    def __init__(self, parsed: Parsed, tracer: Tracer, env: dict[str, Any]) -> None:
        self.parsed = parsed
        self.tracer = tracer
        self.env = env
        self.in_loop = 0

    def error(self, node: ast.AST, construct: str, hint: str) -> ScriptError:
        return self.parsed.source.error(node, construct, hint)

    def run(self) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("error", TracerWarning)
            returned = self.block(self.parsed.tree.body)
        return None if returned is None else returned.value

    def fork(self, env: dict[str, Any]) -> Interpreter:
        child = Interpreter(self.parsed, self.tracer, env)
        child.in_loop = self.in_loop
        return child

    # -- statements ----------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt]) -> Returned | None:
        for k, stmt in enumerate(stmts):
            if isinstance(stmt, ast.If):
                result = self.if_statement(stmt, stmts[k + 1 :])
                if result is not None:
                    return result
                continue
            result = self.statement(stmt)
            if result is not None:
                return result
        return None

    def statement(self, stmt: ast.stmt) -> Returned | None:
        try:
            return self._statement(stmt)
        except ScriptError:
            raise
        except Exception as e:  # an op or a Python rule failed: say where
            raise self.error(stmt, type(e).__name__, str(e)) from e

    def _statement(self, stmt: ast.stmt) -> Returned | None:
        if isinstance(stmt, ast.Return):
            if self.in_loop:
                raise self.error(stmt, "return inside a loop", "break, and return after it")
            return Returned(None if stmt.value is None else self.eval(stmt.value))
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.assign(target, stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                self.assign(stmt.target, stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            name = stmt.target.id
            with self.tracer.name_scope(name):
                value = binary(
                    _BINOPS[type(stmt.op)], self.lookup(name, stmt), self.eval(stmt.value)
                )
            self.env[name] = value
        elif isinstance(stmt, ast.Expr):
            if not isinstance(stmt.value, ast.Constant):  # docstrings
                self.eval(stmt.value)
        elif isinstance(stmt, ast.For) and not _is_range(stmt.iter):
            return self.unrolled_for(stmt)
        elif isinstance(stmt, (ast.For, ast.While)):
            self.in_loop += 1
            try:
                control.lower_loop(self, stmt)
            finally:
                self.in_loop -= 1
        elif isinstance(stmt, ast.Break):
            raise self.error(
                stmt,
                "break",
                "break as the only statement of `if cond:` at the top level of the loop body",
            )
        elif not isinstance(stmt, ast.Pass):
            raise self.error(stmt, type(stmt).__name__, "not supported in script")
        return None

    def unrolled_for(self, stmt: ast.For) -> Returned | None:
        """`for m in self.layers:` over a compile-time sequence: unrolled."""
        items = self.eval(stmt.iter)
        if is_runtime(items) or isinstance(items, (TensorList, ShapeOf)):
            raise self.error(
                stmt.iter,
                f"for loop over {ast.unparse(stmt.iter)!r}",
                "loop over range(n) and index with the counter",
            )
        if any(isinstance(n, ast.Break) for n in ast.walk(stmt)):
            raise self.error(
                stmt,
                "break in a loop over a Python sequence",
                "loop over range(n) to break on a tensor condition",
            )
        for item in list(items):
            self.bind(stmt.target, item)
            result = self.block(stmt.body)
            if result is not None:
                return result
        return None

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            return
        values = list(value) if isinstance(value, (tuple, list)) else None
        if values is None or len(values) != len(target.elts):
            want = f"the right side must be a tuple of {len(target.elts)} values"
            raise self.error(target, "tuple assignment", want)
        for name, v in zip(target.elts, values):
            self.env[name.id] = v

    def assign(self, target: ast.expr, value_node: ast.expr) -> None:
        hint = target.id if isinstance(target, ast.Name) else "value"
        with self.tracer.name_scope(hint):
            value = self.eval(value_node)
        self.bind(target, value)

    def if_statement(self, stmt: ast.If, rest: list[ast.stmt]) -> Returned | None:
        try:
            cond = self.eval(stmt.test)
        except ScriptError:
            raise
        except Exception as e:
            raise self.error(stmt.test, type(e).__name__, str(e)) from e
        if not is_runtime(cond):
            taken = stmt.body if cond else stmt.orelse
            result = self.block(taken)
            return result if result is not None else self.block(rest) if rest else None
        then_returns, else_returns = control.returns(stmt.body), control.returns(stmt.orelse)
        if then_returns or else_returns:
            then_body = stmt.body if then_returns else stmt.body + rest
            else_body = stmt.orelse if else_returns else stmt.orelse + rest
            if not (control.returns(then_body) and control.returns(else_body)):
                raise self.error(
                    stmt, "return in one branch only", "end the function with a return after the if"
                )
            if self.in_loop:
                raise self.error(stmt, "return inside a loop", "break, and return after it")
            return Returned(control.lower_if(self, stmt, cond, then_body, else_body, True))
        control.lower_if(self, stmt, cond, stmt.body, stmt.orelse, False)
        return self.block(rest) if rest else None

    # -- expressions ---------------------------------------------------------------------

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.env:
            value = self.env[name]
            if isinstance(value, Undefined):
                raise self.error(node, f"variable {name!r}", value.why)
            return value
        try:
            return self.parsed.resolve(name)
        except NameError:
            raise self.error(node, f"unknown name {name!r}", "define it first") from None

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, f"eval_{type(node).__name__}", None)
        if method is None:
            raise self.error(node, type(node).__name__, "not supported in script")
        try:
            return method(node)
        except ScriptError:
            raise
        except TracerWarning as e:
            raise self.error(
                node,
                "conversion of a tensor to a Python value",
                f"{e}; keep the value a tensor (compare tensors, use F.where)",
            ) from e
        except Exception as e:
            raise self.error(node, ast.unparse(node), f"{type(e).__name__}: {e}") from e

    def eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def eval_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def eval_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.eval(e) for e in node.elts)

    def eval_List(self, node: ast.List) -> Any:
        return TensorList([self.eval(e) for e in node.elts])

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"operator {type(node.op).__name__}", "use + - * / @ **")
        return binary(op, self.eval(node.left), self.eval(node.right))

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            if not is_runtime(value):
                return not value
            return with_kind(self.call_op("Not", as_bool(self.tracer, value)), kind_of(value))
        if isinstance(node.op, ast.USub):
            return with_kind(-value, kind_of(value)) if is_runtime(value) else -value
        if isinstance(node.op, ast.UAdd):
            return value
        raise self.error(node, "operator ~", "use F.where or Not on bool tensors")

    def call_op(self, op_type: str, *inputs: Any) -> Any:
        from netbrew.nn._dispatch import call

        return call(op_type, list(inputs))

    def eval_BoolOp(self, node: ast.BoolOp) -> Any:
        op = "And" if isinstance(node.op, ast.And) else "Or"
        return boolean(self.tracer, op, [self.eval(v) for v in node.values])

    def eval_Compare(self, node: ast.Compare) -> Any:
        left, results = self.eval(node.left), []
        for op_node, right_node in zip(node.ops, node.comparators):
            op = _COMPARE.get(type(op_node))
            if op is None:
                raise self.error(
                    node, f"comparison {type(op_node).__name__}", "compare with == != < <= > >="
                )
            right = self.eval(right_node)
            results.append(binary(op, left, right))
            left = right
        return results[0] if len(results) == 1 else boolean(self.tracer, "And", results)

    def eval_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.eval(node.test)
        if is_runtime(cond):
            raise self.error(
                node,
                "conditional expression on a tensor",
                "use F.where(cond, a, b), or an if statement",
            )
        return self.eval(node.body if cond else node.orelse)

    def eval_Slice(self, node: ast.Slice) -> Any:
        parts = [None if p is None else self.eval(p) for p in (node.lower, node.upper, node.step)]
        if is_runtime(parts[2]):
            raise self.error(node, "slice step from a tensor", "use a constant step")
        return slice(*parts)

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        if is_runtime(base) and node.attr == "shape":
            return ShapeOf(base)
        return constant_number(getattr(base, node.attr))

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        base, index = self.eval(node.value), self.eval(node.slice)
        if isinstance(base, ShapeOf):
            if not isinstance(index, int):
                raise self.error(
                    node,
                    "x.shape indexed by a tensor or a slice",
                    "index x.shape with an int constant",
                )
            return dim(base.value, index)
        if isinstance(base, TensorList):
            if base.stacked is not None:
                return getitem(base.stacked, index)
            return base.items[index]
        if is_runtime(base):
            return with_kind(getitem(base, index), "tensor")
        if is_runtime(index):
            raise self.error(
                node,
                f"a {type(base).__name__} indexed by a tensor",
                "index tensors or lists with tensors",
            )
        return base[index]

    def eval_Call(self, node: ast.Call) -> Any:
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = self.eval(func.value)
            if isinstance(owner, TensorList) and func.attr == "append":
                (arg,) = [self.eval(a) for a in node.args]
                owner.append(arg)
                return None
            if is_runtime(owner) and func.attr == "size":
                (i,) = [self.eval(a) for a in node.args]
                return dim(owner, i)
            fn = getattr(owner, func.attr)
        else:
            fn = self.eval(func)
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        return self.invoke(node, fn, args, kwargs)

    def invoke(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        from netbrew.script.function import BoundScript, ScriptFunction

        if fn is range:
            raise self.error(node, "range outside a for loop", "use it as `for i in range(n)`")
        if isinstance(fn, type(len)) and fn.__module__ == "builtins" or fn in _CASTS:
            return call_builtin(fn, args, self.tracer)
        if (fn is F.stack or fn is F.cat) and args and isinstance(args[0], TensorList):
            items = args[0]
            dim_ = kwargs.get("dim", args[1] if len(args) > 1 else 0)
            if items.stacked is not None:
                return stack_list(items, dim_, concat=fn is F.cat)
            args = [items.items, *args[1:]]
        args = [a.items if isinstance(a, TensorList) and a.stacked is None else a for a in args]
        if isinstance(fn, (ScriptFunction, BoundScript)) or isinstance(fn, Module):
            return fn(*args, **kwargs)  # inlined: the tracer is active
        if is_functional(fn) or is_runtime(getattr(fn, "__self__", None)):
            return fn(*args, **kwargs)
        if is_user_function(fn):
            return inline(fn, args, kwargs, self.tracer)
        if all(not is_runtime(a) for a in [*args, *kwargs.values()]):
            return fn(*args, **kwargs)  # compile-time Python (math on constants)
        raise self.error(
            node,
            f"call to {ast.unparse(node.func)}",
            "script records netbrew.nn.functional, tensor methods, submodules and Python functions",
        )


def inline(fn: Any, args: list, kwargs: dict, tracer: Tracer, parsed: Parsed | None = None) -> Any:
    """Lowers a call of a Python function (or bound method) into the current block."""
    owner = getattr(fn, "__self__", None)
    parsed = parsed or parse(fn.__func__ if owner is not None else fn)
    names = parsed.arg_names[1:] if owner is not None else parsed.arg_names
    if len(args) > len(names):
        raise TypeError(f"{parsed.source.function} takes {len(names)} arguments, got {len(args)}")
    env = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError(f"{parsed.source.function} has no argument {key!r}")
        env[key] = value
    defaults = parsed.fn.__defaults__ or ()
    for name, default in zip(names[len(names) - len(defaults) :], defaults):
        env.setdefault(name, default)
    missing = [n for n in names if n not in env]
    if missing:
        raise TypeError(f"{parsed.source.function} is missing arguments {missing}")
    if owner is not None:
        env[parsed.arg_names[0]] = owner
    for name, value in env.items():
        kind = parsed.arg_types.get(name)
        if isinstance(value, TracedValue) and kind and not hasattr(value, "script_kind"):
            with_kind(value, kind)
    return Interpreter(parsed, tracer, env).run()
