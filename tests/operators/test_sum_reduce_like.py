"""SumReduceLike: sums a broadcast result back to the shape of the smaller operand; its
gradient broadcasts back."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, check_op, rand, run_op


@pytest.mark.parametrize(
    "big,small",
    [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 3, 1)), ((2, 3), ())],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_reduce_like(big, small, dtype):
    a, b = rand(*big, dtype=dtype), rand(*small, dtype=dtype, seed=1)

    def reference(a, b):
        lead = a.ndim - b.ndim
        out = a.sum(axis=tuple(range(lead))) if lead else a
        axes = tuple(i for i, d in enumerate(b.shape) if d == 1 and out.shape[i] != 1)
        return (out.sum(axis=axes, keepdims=True).reshape(b.shape),)

    check_op("SumReduceLike", [a, b], reference)


def test_sum_reduce_like_rejects_non_broadcast_shape():
    with pytest.raises(OperatorError, match=r"shape \[3\] does not broadcast to \[2, 4\]"):
        run_op("SumReduceLike", [rand(2, 4), rand(3)])


@pytest.mark.parametrize(
    "big,small", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 3, 4), (1, 3, 1)), ((2, 3), ())]
)
def test_sum_reduce_like_gradient_broadcasts_back(big, small):
    check_gradient("SumReduceLike", [rand(*big), rand(*small, seed=1)], wrt=0)


def test_sum_reduce_like_gradient_reads_only_the_shape_of_a():
    fwd = op_def("SumReduceLike", ["a", "b"], ["c"])
    ops = GRADIENTS["SumReduceLike"](fwd, ["dc"], ["da", "db"])
    assert [(o.type, list(o.input)) for o in ops] == [
        ("Shape", ["a"]),
        ("Expand", ["dc", "da_shape"]),
    ]
    assert all("db" not in o.output for o in ops)  # B lends only its shape: no gradient
    assert GRADIENTS["SumReduceLike"](fwd, ["dc"], [None, "db"]) == []


def test_second_order_through_a_broadcast_add():
    # p = (x + b) * v with b broadcast over x's rows. Seeded with a fed dp, the first backward
    # gives db = SumReduceLike(dp * v, b); z = sum(db * u) then has dz/dv = dp * u (u broadcast
    # back over the rows), which only SumReduceLike's gradient can give.
    net = Net("second")
    net.Add(["x", "b"], "s")
    net.Mul(["s", "v"], "p")
    first = add_gradient_ops(net, ["p"], wrt=["b"], seeds={"p": "dp"})
    assert [o.type for o in net.ops[-2:]] == ["SumReduceLike", "SumReduceLike"]
    net.Mul([first["b"], "u"], "bu")
    net.ReduceSum(["bu"], "z", keepdims=0)
    second = add_gradient_ops(net, ["z"], wrt=["v"])
    u, dp = np.array([1.0, -2.0, 3.0], np.float32), rand(2, 3, seed=3)
    feeds = {"x": rand(2, 3), "b": rand(3, seed=1), "v": rand(2, 3, seed=2), "u": u, "dp": dp}
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    np.testing.assert_allclose(ws.fetch_blob(second["v"]), dp * u, rtol=1e-6)
