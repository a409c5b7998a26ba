"""ScriptError: every construct outside the subset, with file, line and a fix, at once."""

import inspect

import numpy as np
import pytest

import netbrew
import netbrew.nn.functional as F
from netbrew import ScriptError


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def uses_try(x):
    try:
        y = x + 1.0
    except ValueError:
        y = x
    return y


def uses_dict_comprehension(x):
    table = {k: x for k in range(3)}
    return table


def uses_numpy(x):
    return np.exp(x) + 1.0


def everything_wrong(x):
    y = np.tanh(x)
    try:
        y = y * 2.0
    finally:
        pass
    pairs = {i: i for i in range(2)}
    return [v for v in pairs]


@pytest.mark.parametrize(
    "fn,text,construct",
    [
        (uses_try, "try:", "try statement"),
        (uses_dict_comprehension, "table = ", "dict comprehension"),
        (uses_numpy, "np.exp", "call to np.exp (numpy)"),
    ],
)
def test_unsupported_construct_names_file_and_line(fn, text, construct):
    with pytest.raises(ScriptError) as info:
        netbrew.script(fn)
    (problem,) = info.value.problems
    assert problem.file == __file__
    assert problem.line == line_of(fn, text)
    assert problem.construct == construct
    assert f"{__file__}:{problem.line}:" in str(info.value)
    assert problem.hint  # what to write instead


def test_every_problem_is_reported_at_once():
    with pytest.raises(ScriptError) as info:
        netbrew.script(everything_wrong)
    constructs = [p.construct for p in info.value.problems]
    assert constructs == [
        "call to np.tanh (numpy)",
        "try statement",
        "dict comprehension",
        "list comprehension",
    ]
    assert "4 problems" in str(info.value)
    assert [p.line for p in info.value.problems] == sorted(p.line for p in info.value.problems)


def test_column_is_reported():
    with pytest.raises(ScriptError) as info:
        netbrew.script(uses_numpy)
    assert info.value.problems[0].column == 12  # `np.exp(x)` after "    return "


def changes_type_in_branch(x):
    if x.sum() > 0:
        y = x * 2.0
    else:
        y = 1
    return y


def changes_type_in_loop(x, n: int):
    total = 0
    for i in range(n):
        total = total + x[i]
    return total


def changes_dtype_in_branch(x):
    if x.sum() > 0:
        y = x
    else:
        y = F.argmax(x, 0)
    return y


@pytest.mark.parametrize(
    "fn,words",
    [
        (changes_type_in_branch, ["'y'", "float32 tensor (rank 1)", "int", "then-branch"]),
        (changes_type_in_loop, ["'total'", "before the loop", "after an iteration"]),
        (changes_dtype_in_branch, ["'y'", "float32 tensor", "int64 tensor"]),
    ],
)
def test_variable_whose_type_differs_is_named(fn, words):
    scripted = netbrew.script(fn)  # the source is fine; types are checked when compiled
    with pytest.raises(ScriptError, match="changes type") as info:
        scripted.compile(np.ones(3, np.float32), *([2] if "n" in fn.__code__.co_varnames else []))
    for word in words:
        assert word in str(info.value)
    assert info.value.problems[0].line == line_of(fn, "if " if "branch" in fn.__name__ else "for ")


def branch_defines_one_side(x):
    if x.sum() > 0:
        z = x * 2.0
    return z


def loop_local_used_after(x, n: int):
    for i in range(n):
        step = x[i]
    return step


def tensor_to_python(x):
    return x * x.sum().item()


def tensor_conditional_expression(x):
    return x if x.sum() > 0 else -x


@pytest.mark.parametrize(
    "fn,match",
    [
        (branch_defines_one_side, "assigned in only one branch"),
        (loop_local_used_after, "first assigned inside the loop"),
        (tensor_to_python, "conversion of a tensor to a Python value"),
        (tensor_conditional_expression, "use F.where"),
    ],
)
def test_compile_time_errors(fn, match):
    args = [np.ones((3, 2), np.float32)] + ([2] if "n" in fn.__code__.co_varnames else [])
    with pytest.raises(ScriptError, match=match) as info:
        netbrew.script(fn).compile(*args)
    assert info.value.problems[0].file == __file__


def bad_annotation(x: list):
    return x


def test_bad_annotation_and_nested_function():
    def outer(x):
        def inner(y):
            return y

        return inner(x)

    with pytest.raises(ScriptError, match="annotate with Tensor, int, float or bool"):
        netbrew.script(bad_annotation)
    with pytest.raises(ScriptError, match="nested function"):
        netbrew.script(outer)


def test_nets_before_compiling():
    scripted = netbrew.script(branch_defines_one_side)
    with pytest.raises(RuntimeError, match="has not been compiled yet"):
        _ = scripted.predict_net
