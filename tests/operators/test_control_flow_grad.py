"""Gradients of If, Loop and Scan (and autodiff's captured reads), against central
differences, closed forms and torch autograd."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops, captured_reads
from netbrew.operators import GRADIENTS, GradientNotWritten
from netbrew.testing import check_gradient, rand, run_op
from tests.operators.net_gradcheck import check_net_gradient, graph, net_gradients, run_blobs


def f64(*shape, seed=0):
    return rand(*shape, dtype=np.float64, seed=seed)


# --------------------------------------------------------------------- captured reads
def test_captured_reads_follow_order_locals_and_nesting():
    inner = graph([op_def("Add", ["t", "deep"], ["u"])], [], ["u"])
    body = graph(
        [
            op_def("Mul", ["a", "w"], ["t"]),  # a is formal, t local after this op
            op_def("If", ["flag"], ["r"], then_branch=inner, else_branch=inner),
            op_def("Add", ["r", "w"], ["out"]),
        ],
        ["a"],
        ["out", "passed"],
    )
    loop = op_def("Loop", ["m", "", "v"], ["v2"], body=body)
    # inner reads t (local to body) and deep (outer); the output list reads "passed"
    assert captured_reads(loop) == ["w", "flag", "deep", "passed"]
    assert captured_reads(op_def("Relu", ["x"], ["y"])) == []


def test_seeds_replace_the_ones_and_must_name_losses():
    net = graph([op_def("Mul", ["x", "w"], ["y"])])
    grads = add_gradient_ops(net, ["y"], wrt=["x"], seeds={"y": "dy"})
    blobs = run_blobs(net, {"x": f64(3), "w": f64(3, seed=1), "dy": f64(3, seed=2)})
    np.testing.assert_allclose(blobs[grads["x"]], f64(3, seed=1) * f64(3, seed=2))
    assert not any(op.type == "ConstantFill" for op in net.op)
    with pytest.raises(ValueError, match="not losses"):
        add_gradient_ops(graph([op_def("Mul", ["x", "w"], ["y"])]), ["y"], seeds={"z": "dz"})


# -------------------------------------------------------------------------------- If
THEN = graph([op_def("Mul", ["x", "w"], ["t"])], [], ["t"])
ELSE = graph([op_def("Add", ["x", "w"], ["e"])], [], ["e"])


def if_net(then=THEN, other=ELSE, outputs=("y",)):
    return [
        op_def("If", ["c"], list(outputs), then_branch=then, else_branch=other),
        op_def("ReduceSum", [outputs[0]], ["loss"], keepdims=0),
    ]


@pytest.mark.parametrize("cond", [True, False])
def test_if_gradient_reaches_blobs_the_branches_capture(cond):
    x, w = f64(3), f64(3, seed=1)
    got = check_net_gradient(if_net(), {"c": np.array(cond), "x": x, "w": w}, ["x", "w"])
    np.testing.assert_allclose(got["x"], w if cond else np.ones(3))
    np.testing.assert_allclose(got["w"], x if cond else np.ones(3))


@pytest.mark.parametrize("cond", [True, False])
def test_if_branch_that_ignores_a_blob_gives_it_zeros(cond):
    # then: y = x * x (w unused); else: y = w
    then = graph([op_def("Mul", ["x", "x"], ["t"])], [], ["t"])
    other = graph([], [], ["w"])
    feeds = {"c": np.array([cond]), "x": f64(2, 3), "w": f64(2, 3, seed=1)}
    got = check_net_gradient(if_net(then, other), feeds, ["x", "w"])
    assert not (got["w"] if cond else got["x"]).any()


def test_if_output_without_gradient_and_nested_if():
    # outer then-branch holds an If on d; only the first of two outputs reaches the loss
    inner_then = graph([op_def("Mul", ["x", "w"], ["p"])], [], ["p"])
    inner_else = graph([op_def("Sub", ["x", "w"], ["p"])], [], ["p"])
    then = graph(
        [op_def("If", ["d"], ["q"], then_branch=inner_then, else_branch=inner_else)],
        [],
        ["q", "w"],
    )
    other = graph([op_def("Neg", ["w"], ["n"])], [], ["n", "x"])
    for c, d in [(True, True), (True, False), (False, True)]:
        feeds = {"c": np.array(c), "d": np.array(d), "x": f64(4), "w": f64(4, seed=1)}
        check_net_gradient(if_net(then, other, ("y", "unused")), feeds, ["x", "w"])


def test_if_gradient_errors_name_the_branch():
    bad = graph([op_def("SoftmaxGradient", ["x", "x"], ["t"])], [], ["t"])
    with pytest.raises(SchemaError, match="If else_branch: .*SoftmaxGradient"):
        add_gradient_ops(graph(if_net(THEN, bad)), ["loss"], wrt=["x"])
    with pytest.raises(OperatorError, match="got 0 output gradients dY, 'seeded' lists 1"):
        run_op(
            "IfGradient",
            [np.array(True)],
            then_branch=THEN,
            else_branch=ELSE,
            seeded=[0],
            wrt=["x"],
        )
    with pytest.raises(OperatorError, match="captured blob 'x'"):
        run_op(
            "IfGradient",
            [np.array(True), f64(3)],
            then_branch=THEN,
            else_branch=ELSE,
            seeded=[0],
            wrt=["x"],
        )


def test_if_gradient_not_written_inside_a_branch_is_reported(monkeypatch):
    monkeypatch.setitem(GRADIENTS._items, "Mul", GradientNotWritten("not written in this test"))
    with pytest.raises(SchemaError, match="If then_branch: .*Mul .*not written in this test"):
        add_gradient_ops(graph(if_net()), ["loss"], wrt=["x"])


def test_if_integer_captured_blob_gets_zeros():
    # then: y = Gather(x, idx): idx is an int the branch reads, its gradient is zeros
    then = graph([op_def("Gather", ["x", "idx"], ["t"], axis=0)], [], ["t"])
    feeds = {"c": np.array(True), "x": f64(4), "idx": np.array([1, 3], np.int64)}
    grads, blobs, net = net_gradients(if_net(then, then), feeds, ["x", "idx"])
    np.testing.assert_allclose(blobs[grads["x"]], [0, 1, 0, 1])
    # IfGradient learns that idx is an integer only when it runs, so it writes zeros
    assert blobs[grads["idx"]].dtype == np.int64 and not blobs[grads["idx"]].any()


# -------------------------------------------------------------------------------- Loop
# body(i, c, v) -> (c, v * w): reads w from the outer scope
POWER = graph([op_def("Mul", ["v", "w"], ["v2"])], ["i", "c", "v"], ["c", "v2"])


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_power_matches_closed_form(n):
    x, w = f64(3) + 2, f64(3, seed=1) + 2  # away from zero, so w^(n-1) is tame
    ops = [
        op_def("Loop", ["m", "", "x"], ["y"], body=POWER),
        op_def("ReduceSum", ["y"], ["loss"], keepdims=0),
    ]
    feeds = {"m": np.array(n, np.int64), "x": x, "w": w}
    got = check_net_gradient(ops, feeds, ["x", "w"])
    np.testing.assert_allclose(got["x"], w**n)
    np.testing.assert_allclose(got["w"], n * w ** max(n - 1, 0) * x if n else 0 * x)


@pytest.mark.parametrize("trip", [0, 3])
def test_loop_check_gradient_with_scan_outputs_and_a_counter(trip):
    # body(i, c, v, k) -> (c, v * v * 0.5 + v, k + 1, sin(v)): k is an int counter
    body = graph(
        [
            op_def("Mul", ["v", "v"], ["vv"]),
            op_def("Constant", [], ["half"], value=np.array(0.5)),
            op_def("Mul", ["vv", "half"], ["h"]),
            op_def("Add", ["h", "v"], ["v2"]),
            op_def("Constant", [], ["one"], value=np.array(1, np.int64)),
            op_def("Add", ["k", "one"], ["k2"]),
            op_def("Sin", ["v"], ["s"]),
        ],
        ["i", "c", "v", "k"],
        ["c", "v2", "k2", "s"],
    )
    inputs = [np.array(trip, np.int64), np.array(True), f64(2, 2) * 0.5, np.array(0, np.int64)]
    check_gradient("Loop", inputs, outputs=3, body=body, eps=1e-6, rtol=1e-6, atol=1e-9)


def test_loop_gathers_captured_rows_and_stops_on_cond():
    # body(i, c, acc) -> (sum(acc) < 4, acc * 1.5 + x[i], acc): a while loop over x's rows
    body = graph(
        [
            op_def("Gather", ["x", "i"], ["xi"], axis=0),
            op_def("Mul", ["acc", "k"], ["scaled"]),
            op_def("Add", ["scaled", "xi"], ["acc2"]),
            op_def("ReduceSum", ["acc2"], ["total"], keepdims=0),
            op_def("Less", ["total", "limit"], ["c2"]),
        ],
        ["i", "c", "acc"],
        ["c2", "acc2", "acc"],
    )
    ops = [
        op_def("Loop", ["m", "", "acc0"], ["final", "history"], body=body),
        op_def("Mul", ["history", "history"], ["sq"]),
        op_def("ReduceSum", ["sq"], ["part"], keepdims=0),
        op_def("ReduceSum", ["final"], ["end"], keepdims=0),
        op_def("Add", ["part", "end"], ["loss"]),
    ]
    feeds = {
        "m": np.array(6, np.int64),
        "acc0": f64(2) * 0.1 + 0.5,
        "x": f64(6, 2) * 0.1 + 0.3,
        "k": np.array(1.5),
        "limit": np.array(4.0),
    }
    steps = run_blobs(graph(ops), feeds)["history"].shape[0]
    assert 1 < steps < 6  # the cond stops it early
    check_net_gradient(ops, feeds, ["acc0", "x", "k"])


def test_loop_with_if_inside_and_loop_carried_dependency_through_captures():
    # body(i, c, v) -> (c, If(i < 2, v * w, v + w)): branches capture v (the body's) and w
    grow = graph([op_def("Mul", ["v", "w"], ["o"])], [], ["o"])
    shift = graph([op_def("Add", ["v", "w"], ["o"])], [], ["o"])
    body = graph(
        [
            op_def("Less", ["i", "two"], ["early"]),
            op_def("If", ["early"], ["v2"], then_branch=grow, else_branch=shift),
        ],
        ["i", "c", "v"],
        ["c", "v2"],
    )
    ops = [
        op_def("Loop", ["m", "", "x"], ["y"], body=body),
        op_def("ReduceSum", ["y"], ["loss"], keepdims=0),
    ]
    feeds = {
        "m": np.array(4, np.int64),
        "x": f64(3),
        "w": f64(3, seed=1) + 1.5,
        "two": np.array(2, np.int64),
    }
    got = check_net_gradient(ops, feeds, ["x", "w"])
    x, w = feeds["x"], feeds["w"]
    np.testing.assert_allclose(got["x"], w * w)  # y = x w^2 + 2w
    np.testing.assert_allclose(got["w"], 2 * x * w + 2)


def test_loop_gradient_errors():
    with pytest.raises(OperatorError, match="LoopGradient: got 3 inputs, expected 4"):
        run_op("LoopGradient", [np.array(1, np.int64), None, f64(2)], body=POWER)
    with pytest.raises(OperatorError, match="scan output 0 has shape \\[2\\], expected 3 rows"):
        body = graph([], ["i", "c", "v"], ["c", "v", "v"])
        run_op("LoopGradient", [np.array(3, np.int64), None, f64(2), None, f64(2)], body=body)


# -------------------------------------------------------------------------------- Scan
# body(s, x) -> (s + x, s + x): a cumulative sum
CUMSUM = graph([op_def("Add", ["s", "x"], ["s2"])], ["s", "x"], ["s2", "s2"])


@pytest.mark.parametrize(
    "in_axis, in_dir, out_axis, out_dir",
    [(0, 0, 0, 0), (1, 1, 0, 0), (-1, 0, 1, 1), (0, 1, -1, 0)],
)
def test_scan_cumulative_sum(in_axis, in_dir, out_axis, out_dir):
    xs = np.moveaxis(f64(5, 3), 0, in_axis)
    attrs = dict(
        body=CUMSUM,
        num_scan_inputs=1,
        scan_input_axes=[in_axis],
        scan_input_directions=[in_dir],
        scan_output_axes=[out_axis],
        scan_output_directions=[out_dir],
    )
    check_gradient("Scan", [f64(3, seed=2), xs], outputs=2, eps=1e-6, rtol=1e-6, **attrs)


def test_scan_cumsum_closed_form():
    # loss = sum(final) + sum(ys): each x_t counts once in final and (T - t) times in ys
    ops = [
        op_def("Scan", ["s0", "xs"], ["final", "ys"], body=CUMSUM, num_scan_inputs=1),
        op_def("ReduceSum", ["final"], ["a"], keepdims=0),
        op_def("ReduceSum", ["ys"], ["b"], keepdims=0),
        op_def("Add", ["a", "b"], ["loss"]),
    ]
    got = check_net_gradient(ops, {"s0": f64(3), "xs": f64(4, 3, seed=1)}, ["s0", "xs"])
    np.testing.assert_allclose(got["s0"], np.full(3, 5.0))
    np.testing.assert_allclose(got["xs"], np.repeat([[5.0], [4.0], [3.0], [2.0]], 3, axis=1))


def test_scan_tanh_rnn_matches_torch():
    torch = pytest.importorskip("torch")
    # body(h, x) -> (tanh(h W + x U + b), same): W, U, b are captured
    body = graph(
        [
            op_def("MatMul", ["h", "W"], ["hw"]),
            op_def("MatMul", ["x", "U"], ["xu"]),
            op_def("Add", ["hw", "xu"], ["pre"]),
            op_def("Add", ["pre", "b"], ["pre_b"]),
            op_def("Tanh", ["pre_b"], ["h2"]),
        ],
        ["h", "x"],
        ["h2", "h2"],
    )
    ops = [
        op_def(
            "Scan",
            ["h0", "xs"],
            ["hT", "hs"],
            body=body,
            num_scan_inputs=1,
            scan_input_axes=[1],
            scan_output_axes=[1],
        ),
        op_def("Mul", ["hs", "hs"], ["sq"]),
        op_def("ReduceSum", ["sq"], ["loss"], keepdims=0),
    ]
    feeds = {
        "h0": f64(2, 4),
        "xs": f64(2, 5, 3, seed=1),
        "W": f64(4, 4, seed=2),
        "U": f64(3, 4, seed=3),
        "b": f64(4, seed=4),
    }
    wrt = ["h0", "xs", "W", "U", "b"]
    grads, blobs, _ = net_gradients(ops, feeds, wrt)
    t = {k: torch.tensor(v, requires_grad=True) for k, v in feeds.items()}
    h, hs = t["h0"], []
    for step in range(5):
        h = torch.tanh(h @ t["W"] + t["xs"][:, step] @ t["U"] + t["b"])
        hs.append(h)
    (torch.stack(hs, 1) ** 2).sum().backward()
    for name in wrt:
        np.testing.assert_allclose(blobs[grads[name]], t[name].grad.numpy(), rtol=1e-10)


def test_scan_integer_scan_input_and_state_get_zeros():
    # body(s, n, x, k) -> (s * x, n + k, s): k an int scan input, n an int state
    body = graph(
        [op_def("Mul", ["s", "x"], ["s2"]), op_def("Add", ["n", "k"], ["n2"])],
        ["s", "n", "x", "k"],
        ["s2", "n2", "s"],
    )
    inputs = [f64(2) + 1, np.array(0, np.int64), f64(3, 2, seed=1) + 1, np.arange(3)]
    check_gradient(
        "Scan", inputs, outputs=3, wrt=[0, 2], body=body, num_scan_inputs=2, eps=1e-6, rtol=1e-6
    )
    maker = GRADIENTS["Scan"]
    op = op_def("Scan", ["s", "n", "x", "k"], ["a", "b", "c"], body=body, num_scan_inputs=2)
    (grad_op,) = maker(op, ["da", None, "dc"], ["ds", "dn", "dx", "dk"])
    assert grad_op.type == "ScanGradient"
    blobs = run_blobs(
        graph([grad_op]), dict(zip(["s", "n", "x", "k"], inputs), da=np.ones(2), dc=np.ones((3, 2)))
    )
    assert blobs["dn"].dtype == np.int64 and not blobs["dk"].any()


def test_scan_gradient_errors():
    with pytest.raises(OperatorError, match="ScanGradient: got 2 inputs"):
        run_op("ScanGradient", [f64(3), f64(4, 3)], body=CUMSUM, num_scan_inputs=1)
    with pytest.raises(OperatorError, match="gradient of scan output 0 has shape \\[2, 3\\]"):
        run_op(
            "ScanGradient",
            [f64(3), f64(4, 3), None, f64(2, 3)],
            outputs=2,
            body=CUMSUM,
            num_scan_inputs=1,
        )


def test_random_op_in_a_differentiated_body_is_refused():
    # the gradient replays the body; fresh noise would not match the forward's
    noisy = graph(
        [op_def("RandomNormal", [], ["noise"], shape=[3]), op_def("Mul", ["v", "noise"], ["v2"])],
        ["i", "c", "v"],
        ["c", "v2"],
    )
    ops = [
        op_def("Loop", ["m", "", "x"], ["y"], body=noisy),
        op_def("ReduceSum", ["y"], ["loss"], keepdims=0),
    ]
    with pytest.raises(SchemaError, match="Loop body: op #0 RandomNormal draws random numbers"):
        add_gradient_ops(graph(ops), ["loss"], wrt=["x"])
    # noise that no differentiated output depends on is fine
    quiet = graph([op_def("RandomNormal", [], ["noise"], shape=[3])], ["i", "c", "v"], ["c", "v"])
    ops[0] = op_def("Loop", ["m", "", "x"], ["y"], body=quiet)
    add_gradient_ops(graph(ops), ["loss"], wrt=["x"])
