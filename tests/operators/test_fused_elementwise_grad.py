"""Gradients of FusedElementwise, the op the fuse_elementwise pass makes of elementwise
chains and DAGs: by central differences, and equal to the unfused ops' own gradients.
(Split from test_fused_grad.py, which keeps the other fused ops.)"""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import jit
from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.args import args_dict
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.passes import fuse_elementwise
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand
from tests.operators.test_fused_grad import EPS

# FusedElementwise, made by the fuse_elementwise pass

CHAINS = {  # (steps as (type, inputs, attrs) writing t0, t1, ...; other inputs: shapes)
    "add_relu_mul_tanh": (
        [("Add", ["x", "b"], {}), ("Relu", ["t0"], {}), ("Mul", ["t1", "s"], {})]
        + [("Tanh", ["t2"], {})],
        {"b": (4, 1), "s": (5,)},
    ),
    "swapped_sub_div_neg": (
        [("Sub", ["c", "x"], {}), ("Div", ["c", "t0"], {}), ("Neg", ["t1"], {})],
        {"c": (1, 5)},
    ),
    "sigmoid_leaky_clip": (
        [("Sigmoid", ["x"], {}), ("Sub", ["t0", "h"], {}), ("LeakyRelu", ["t1"], {"alpha": 0.2})]
        + [("Clip", ["t2", "lo", "hi"], {})],
        {"h": (), "lo": (), "hi": ()},
    ),
    "swish_square_sqrt_exp_log": (  # x read twice, and Mul(t1, t1)
        [("Sigmoid", ["x"], {}), ("Mul", ["x", "t0"], {}), ("Mul", ["t1", "t1"], {})]
        + [("Sqrt", ["t2"], {}), ("Exp", ["t3"], {}), ("Log", ["t4"], {})],
        {},
    ),
    "abs_broadcast_grows_hard_sigmoid_reciprocal_clip": (
        [("Abs", ["x"], {}), ("Add", ["t0", "w"], {}), ("HardSigmoid", ["t1"], {})]
        + [("Reciprocal", ["t2"], {}), ("Clip", ["t3", "", "hi"], {})],
        {"w": (2, 1, 1, 1), "hi": ()},
    ),
    "sum_max_min": (
        [("Sum", ["x", "b"], {}), ("Max", ["t0", "lo"], {}), ("Min", ["hi", "t1"], {})],
        {"b": (5,), "lo": (), "hi": ()},
    ),
}
CONSTANTS = {"lo": -0.3, "hi": 1.2, "h": 0.5, "c": 3.0}
"""Inputs given these values (bounds; c keeps Div away from zero)."""
NO_GRADIENT = {"lo", "hi"}
"""Clip's bounds get no gradient (as Clip's own maker); Max's and Min's do."""


def fused_by_the_pass(chain):
    """The FusedElementwise op fuse_elementwise makes of the chain, and its inputs' values."""
    spec, extra = CHAINS[chain]
    net = NetDef(name=chain, external_input=["x", *extra], external_output=[f"t{len(spec) - 1}"])
    net.op.extend(op_def(t, ins, [f"t{k}"], **a) for k, (t, ins, a) in enumerate(spec))
    out = fuse_elementwise(net)
    assert [op.type for op in out.op] == ["FusedElementwise"]
    (fused,) = out.op
    values = {"x": rand(3, 4, 5, seed=20, low=-2, high=2, dtype=np.float64)}
    for k, (name, shape) in enumerate(extra.items()):
        if name in CONSTANTS:
            values[name] = np.full(shape, CONSTANTS[name])
        else:
            values[name] = rand(*shape, seed=21 + k, low=0.5, high=2, dtype=np.float64)
    return fused, [values[name] for name in fused.input]


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_fused_elementwise_gradient(chain):
    fused, inputs = fused_by_the_pass(chain)
    if chain == "sum_max_min":  # both bounds bite somewhere, so their gradients are not 0
        t0 = inputs[0] + inputs[1]
        assert (t0 < CONSTANTS["lo"]).any() and (t0 > CONSTANTS["hi"]).any()
    wrt = [i for i, name in enumerate(fused.input) if name not in NO_GRADIENT]
    check_gradient("FusedElementwise", inputs, wrt=wrt, eps=EPS, **args_dict(fused.arg))


def test_fused_elementwise_gradient_equals_the_unfused_chains():
    """Autodiff over the fused op gives the unfused chain's gradients, bit for bit (through
    the NumPy kernels: the numba loop's exp and tanh equal them to rounding)."""
    fused, inputs = fused_by_the_pass("swish_square_sqrt_exp_log")
    spec, _ = CHAINS["add_relu_mul_tanh"]
    add_fused, add_inputs = fused_by_the_pass("add_relu_mul_tanh")
    for op, values, steps in (
        (fused, inputs, CHAINS["swish_square_sqrt_exp_log"][0]),
        (add_fused, add_inputs, spec),
    ):
        feeds = {name: v.astype(np.float32) for name, v in zip(op.input, values)}
        got = []
        for ops in ([op_def(t, i, [f"t{k}"], **a) for k, (t, i, a) in enumerate(steps)], [op]):
            net = Net(NetDef(name="chain", op=ops))
            net.ReduceSum([op.output[0]], "loss", keepdims=0)
            grads = add_gradient_ops(net, ["loss"], wrt=list(op.input))
            ws = Workspace()
            for name, value in feeds.items():
                ws.feed_blob(name, value)
            with jit.disabled():
                ws.run_net_once(net)
            got.append([ws.fetch_blob(grads[name]) for name in op.input])
        for want, have in zip(*got):
            np.testing.assert_array_equal(have, want)


def test_fused_elementwise_gradient_recomputes_only_what_it_reads():
    # Relu's gradient reads its result t0; Mul's reads t0 and s; Tanh's reads Y: t1 is
    # never read, so only the Relu step runs again.
    op = op_def("FusedElementwise", ["x", "s"], ["y"], ops=["Relu", "Mul", "Tanh"],
                slots=[0, -1, 1, -1])  # fmt: skip
    ops = GRADIENTS["FusedElementwise"](op, ["y_grad"], ["x_grad", "s_grad"])
    forward = [o for o in ops if o.type in ("Relu", "Mul", "Tanh")]
    assert [o.type for o in forward] == ["Relu", "Mul", "Mul"]  # Mul's own gradient Muls
    assert ops[0].type == "Relu" and list(ops[0].input) == ["x"]
    assert ops[-1].output[0] in ("x_grad", "s_grad")
    # Only dS wanted: Relu's gradient is not built, its result still read by Mul's
    ops = GRADIENTS["FusedElementwise"](op, ["y_grad"], [None, "s_grad"])
    assert [o.type for o in ops] == ["Relu", "TanhGradient", "Mul", "SumReduceLike"]


def test_fused_elementwise_in_place_gradient():
    """Written in place over an input whose value only the last step's shape needs: the
    gradient is built, and equals the unfused ops'; over an input an earlier step's
    gradient reads: refused, as for the unfused ops."""
    a, c, x = rand(4, 3, seed=22), rand(4, 3, seed=23), rand(4, 3, seed=24)
    for steps, ok in (
        ([op_def("Mul", ["a", "c"], ["t"]), op_def("Add", ["t", "x"], ["x"])], True),
        ([op_def("Mul", ["x", "c"], ["t"]), op_def("Relu", ["t"], ["x"])], False),
    ):
        unfused = NetDef(name="n", external_input=["a", "c", "x"], external_output=["x"])
        unfused.op.extend(steps)
        fused = fuse_elementwise(unfused)
        assert fused.op[0].type == "FusedElementwise" and fused.op[0].input[0] == "x"
        results = []
        for net in (unfused, fused):
            net = Net(net)
            net.ReduceSum(["x"], "loss", keepdims=0)
            if not ok:
                with pytest.raises(SchemaError, match=r"'x'.*overwrites"):
                    add_gradient_ops(net, ["loss"], wrt=["c"])
                continue
            grads = add_gradient_ops(net, ["loss"], wrt=["a", "c", "x"])
            ws = Workspace()
            for name, value in {"a": a, "c": c, "x": x}.items():
                ws.feed_blob(name, value)
            ws.run_net_once(net)
            results.append([ws.fetch_blob(grads[n]) for n in "acx"])
        if ok:
            for want, have in zip(*results):
                np.testing.assert_array_equal(have, want)
            np.testing.assert_array_equal(results[1][0], c)


def lstm_cell_net():
    """The LSTM cell's gate math as unfused ops: c2 = f * c + i * g, h2 = o * tanh(c2),
    with f, i, g, o the activations of a0..a3; c2 is an output and read by Tanh."""
    net = NetDef(name="cell", external_input=["a0", "a1", "a2", "a3", "c"],
                 external_output=["h2", "c2"])  # fmt: skip
    net.op.extend(
        op_def(t, ins, [out])
        for t, ins, out in [
            ("Sigmoid", ["a0"], "i"), ("Sigmoid", ["a1"], "f"), ("Tanh", ["a2"], "g"),
            ("Sigmoid", ["a3"], "o"), ("Mul", ["f", "c"], "fc"), ("Mul", ["i", "g"], "ig"),
            ("Add", ["fc", "ig"], "c2"), ("Tanh", ["c2"], "tc"), ("Mul", ["o", "tc"], "h2"),
        ]
    )  # fmt: skip
    return net


@pytest.mark.parametrize("grad_outputs", [[0, 1], [0], [1]])
def test_fused_dag_gradient(grad_outputs):
    (fused,) = fuse_elementwise(lstm_cell_net()).op
    assert fused.type == "FusedElementwise" and list(fused.output) == ["c2", "h2"]
    assert list(fused.input) == ["a0", "a1", "a2", "a3", "c"]
    inputs = [rand(3, 4, seed=30 + k, low=-2, high=2, dtype=np.float64) for k in range(5)]
    wrt = [0, 1, 2, 4] if grad_outputs == [0] else None  # c2 alone does not reach a3 (o)
    check_gradient("FusedElementwise", inputs, outputs=2, grad_outputs=grad_outputs, eps=EPS,
                   wrt=wrt, **args_dict(fused.arg))  # fmt: skip
    if grad_outputs == [0]:
        ops = GRADIENTS["FusedElementwise"](fused, ["dc2", None], [f"d{n}" for n in fused.input])
        assert "da3" not in {b for op in ops for b in op.output}


def test_fused_dag_gradient_equals_the_unfused_ops():
    """c2 gets its gradient from the loss and through h2: the partials are summed, and
    autodiff over the fused op gives the unfused ops' gradients bit for bit."""
    unfused = lstm_cell_net()
    feeds = {
        n: rand(3, 4, seed=40 + k, low=-2, high=2) for k, n in enumerate(unfused.external_input)
    }
    got = []
    for net in (unfused, fuse_elementwise(unfused)):
        net = Net(net)
        net.ReduceSum(["h2"], "lh", keepdims=0)
        net.ReduceSum(["c2"], "lc", keepdims=0)
        net.Add(["lh", "lc"], "loss")
        grads = add_gradient_ops(net, ["loss"], wrt=list(feeds))
        ws = Workspace()
        for name, value in feeds.items():
            ws.feed_blob(name, value)
        with jit.disabled():
            ws.run_net_once(net)
        got.append([ws.fetch_blob(grads[n]) for n in feeds])
    for want, have in zip(*got):
        np.testing.assert_array_equal(have, want)
