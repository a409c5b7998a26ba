"""Script and trace mix: scripted forwards inside traced modules, scripted helpers,
module parameters as init-net blobs, Python constants resolved at compile time."""

import numpy as np
from script_checks import TOL, check_all_ways

import netbrew
import netbrew.nn.functional as F
from netbrew import nn
from netbrew.converters.module import trace
from netbrew.executor import Predictor


class Gate(nn.Module):
    """Doubles its input while the sum stays small; else passes it through."""

    def __init__(self, limit: float) -> None:
        super().__init__()
        self.limit = limit

    @netbrew.script
    def forward(self, x):
        while x.sum() < self.limit:
            x = x * 2.0
        if x.mean() > 10.0:
            x = x - 10.0
        return x


def test_trace_keeps_the_control_flow_of_scripted_submodules():
    nn.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), Gate(50.0), nn.Linear(4, 2))
    example = np.full((2, 3), 0.5, np.float32)
    init, predict = trace(model, example)
    types = [op.type for op in predict.op]
    assert "Loop" in types and "If" in types
    predictor = Predictor(init, predict)
    rng = np.random.default_rng(1)
    for scale in (0.01, 1.0, 40.0):  # different trip counts and branches than the example
        x = np.abs(rng.normal(size=(2, 3))).astype(np.float32) * scale
        np.testing.assert_allclose(predictor.run({"input": x})["output"], model(x), **TOL)


def test_scripted_forward_runs_eagerly_with_current_parameters():
    nn.manual_seed(0)
    gate_model = nn.Sequential(nn.Linear(3, 3), Gate(5.0))
    x = np.ones((1, 3), np.float32)
    first = gate_model(x)  # Gate's forward runs its compiled net
    gate = gate_model[1]
    np.testing.assert_allclose(first, gate.forward.eager(gate_model[0](x)), **TOL)
    scripted = netbrew.script(gate_model)  # Sequential's forward, scripted; Gate inlined
    np.testing.assert_allclose(scripted(x), first, **TOL)
    assert any(op.type == "Loop" for op in scripted.predict_net.op)


def helper_norm(v):
    return v / F.sqrt(F.sum(v * v) + 1e-6)


@netbrew.script
def scripted_helper(v, scale: float):
    return helper_norm(v) * scale


@netbrew.script
def uses_helpers(x, n: int, use_helper: bool):
    out = F.zeros(x.shape[1])
    for i in range(n):
        if x[i].sum() > 0.0:  # a tensor condition: If
            out = out + scripted_helper(x[i], 2.0)
        else:
            out = out - helper_norm(x[i])
    if use_helper:  # a bool argument: decided at run time too
        out = out * 10.0
    return out


def test_helpers_are_inlined_and_bool_arguments_branch():
    x = np.random.default_rng(2).normal(size=(6, 4)).astype(np.float32)
    for use in (True, False):
        check_all_ways(uses_helpers, [x, 5, use], uses_helpers.eager(x, 5, use))


DEBUG = False


@netbrew.script
def constant_branches(x):
    if DEBUG:
        x = x * 100.0  # never compiled: DEBUG is a Python constant
    y = x.shape[0] * 2 + x.size(1)
    return x[0, 1:] + y, x[-1]


def test_python_constants_resolve_at_compile_time():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_all_ways(constant_branches, [x], (x[0, 1:] + (2 * 2 + 3), x[-1]))
    assert not any(op.type == "If" for op in constant_branches.predict_net.op)


@netbrew.script
def nested_with_break(x, limit: float):
    total = F.zeros(x.shape[1])
    rows = 0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            total = total + x[i, j]
        if total.sum() > limit:
            break
        rows = rows + 1  # runs under If(not stop): not on the breaking iteration
    return total, rows


def test_nested_loops_and_statements_after_break():
    x = np.abs(np.random.default_rng(3).normal(size=(6, 3))).astype(np.float32)
    for limit in (0.5, 20.0, 1e6):
        check_all_ways(nested_with_break, [x, limit], nested_with_break.eager(x, limit))
