"""If, Loop and Scan: subgraph bodies, outer-scope reads, nesting, axes and directions."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor.runtime import create_runtime
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import NetDef, TensorShape
from netbrew.testing import check_op, rand, run_op


def graph(ops, inputs=(), outputs=(), shapes=None):
    """A subgraph: formal inputs, outputs, and optional {output: (data_type, dims)} info."""
    net = NetDef(name="body", external_input=list(inputs), external_output=list(outputs))
    net.op.extend(ops)
    for name, (data_type, dims) in (shapes or {}).items():
        net.value_info.append(TensorShape(name=name, data_type=data_type, dims=dims))
    return net


def run_net(ops, feeds, outputs):
    blobs = dict(feeds)
    create_runtime(graph(ops)).run(blobs)
    return [blobs[n] for n in outputs]


# ---------------------------------------------------------------------------------- If
THEN = graph([op_def("Add", ["x", "y"], ["t"])], outputs=["t"])
ELSE = graph([op_def("Concat", ["x", "y"], ["e"], axis=0)], outputs=["e"])


@pytest.mark.parametrize("cond", [True, False])
def test_if_reads_outer_scope_and_shapes_may_differ(cond):
    x, y = rand(3), rand(3, seed=1)
    (out,) = run_net(
        [op_def("If", ["c"], ["out"], then_branch=THEN, else_branch=ELSE)],
        {"c": np.array(cond), "x": x, "y": y},
        ["out"],
    )
    np.testing.assert_allclose(out, x + y if cond else np.concatenate([x, y]))


@pytest.mark.parametrize("cond", [True, False])
def test_if_check_op(cond):
    # the branches read the op's own input blob "in0" from the enclosing scope
    then = graph([op_def("Cast", ["in0"], ["a"], to=np.int32)], outputs=["a", "in0"])
    other = graph([op_def("Constant", [], ["b"], value=np.array([7, 8]))], outputs=["b", "in0"])
    check_op(
        "If",
        [np.array([cond])],
        lambda c: (np.array([1], np.int32) if cond else np.array([7, 8]), c),
        then_branch=then,
        else_branch=other,
    )


def test_if_sequence_output_and_errors():
    then = graph([op_def("SequenceConstruct", ["x", "x"], ["s"])], outputs=["s"])
    (seq,) = run_net(
        [op_def("If", ["c"], ["out"], then_branch=then, else_branch=then)],
        {"c": np.array(True), "x": rand(2)},
        ["out"],
    )
    assert isinstance(seq, list) and len(seq) == 2
    with pytest.raises(OperatorError, match="'cond' must hold one element"):
        run_op("If", [np.array([True, False])], then_branch=THEN, else_branch=ELSE)
    with pytest.raises(OperatorError, match="yields 1 values, the op lists 2"):
        run_net(
            [op_def("If", ["c"], ["o1", "o2"], then_branch=THEN, else_branch=ELSE)],
            {"c": np.array(True), "x": rand(2), "y": rand(2)},
            ["o1"],
        )


# -------------------------------------------------------------------------------- Loop
# body(i, cond, acc) -> (cond, acc + x[i], acc * 2): reads x from the outer scope
LOOP_BODY = graph(
    [
        op_def("Gather", ["x", "i"], ["xi"], axis=0),
        op_def("Add", ["acc", "xi"], ["acc_out"]),
        op_def("Add", ["acc", "acc"], ["twice"]),
        op_def("Identity", ["c_in"], ["c_out"]),
    ],
    inputs=["i", "c_in", "acc"],
    outputs=["c_out", "acc_out", "twice"],
    shapes={"twice": (1, [2])},
)


def loop_reference(x, acc, steps):
    scans = []
    for i in range(steps):
        scans.append(acc + acc)
        acc = acc + x[i]
    return acc, np.stack(scans) if scans else np.empty((0, 2), np.float32)


@pytest.mark.parametrize("trip", [0, 1, 4])
def test_loop_for(trip):
    x, acc = rand(4, 2), rand(2, seed=3)
    final, scans = run_net(
        [op_def("Loop", ["m", "", "acc"], ["final", "scans"], body=LOOP_BODY)],
        {"m": np.array(trip, np.int64), "acc": acc, "x": x},
        ["final", "scans"],
    )
    want_final, want_scans = loop_reference(x, acc, trip)
    np.testing.assert_allclose(final, want_final)
    assert scans.shape == want_scans.shape and scans.dtype == np.float32
    np.testing.assert_allclose(scans, want_scans)


@pytest.mark.parametrize("trip", [0, 3])
def test_loop_check_op(trip):
    # body(i, c, v) -> (c, v * 2, i): a for loop with no outer-scope reads
    body = graph([op_def("Add", ["v", "v"], ["v2"])], ["i", "c", "v"], ["c", "v2", "i"],
                 shapes={"i": (10, [])})  # fmt: skip
    check_op(
        "Loop",
        [np.array(trip, np.int64), np.array(True), rand(2, 2)],
        lambda m, c, v: (v * 2**trip, np.arange(trip, dtype=np.int64)),
        body=body,
    )


def test_loop_while_cond_and_trip_count():
    # body(i, c, n) -> (n + 1 < 5, n + 1): stops when the counter reaches 5
    body = graph(
        [
            op_def("Add", ["n", "one"], ["n_out"]),
            op_def("Less", ["n_out", "five"], ["c_out"]),
        ],
        inputs=["i", "c", "n"],
        outputs=["c_out", "n_out", "i"],
    )
    feeds = {"one": np.array(1, np.int64), "five": np.array(5, np.int64), "n": np.array(0)}
    for m, want in [(None, 5), (np.array(3, np.int64), 3), (np.array(9, np.int64), 5)]:
        ins = ["m" if m is not None else "", "c", "n"]
        out, iters = run_net(
            [op_def("Loop", ins, ["out", "iters"], body=body)],
            {**feeds, "m": m, "c": np.array(True)},
            ["out", "iters"],
        )
        assert int(out) == want
        np.testing.assert_array_equal(iters, np.arange(want, dtype=np.int64))
    (out,) = run_net(
        [op_def("Loop", ["", "c", "n"], ["out", ""], body=body)],
        {**feeds, "c": np.array(False)},
        ["out"],
    )
    assert int(out) == 0  # cond false: no iteration


def test_loop_carries_sequences_and_nests_if():
    # body(i, c, seq) -> (c, seq + [If(i is even) then i else -i])
    then = graph([op_def("Identity", ["i"], ["v"])], outputs=["v"])
    other = graph([op_def("Neg", ["i"], ["w"])], outputs=["w"])
    body = graph(
        [
            op_def("Mod", ["i", "two"], ["r"]),
            op_def("Equal", ["r", "zero"], ["even"]),
            op_def("If", ["even"], ["val"], then_branch=then, else_branch=other),
            op_def("SequenceInsert", ["s", "val"], ["s_out"]),
        ],
        inputs=["i", "c", "s"],
        outputs=["c", "s_out"],
    )
    (seq,) = run_net(
        [
            op_def("SequenceEmpty", [], ["empty"], dtype=7),
            op_def("Loop", ["m", "", "empty"], ["seq"], body=body),
        ],
        {"m": np.array(4), "two": np.array(2), "zero": np.array(0)},
        ["seq"],
    )
    assert [int(v) for v in seq] == [0, -1, 2, -3]


def test_loop_errors():
    with pytest.raises(OperatorError, match="Loop body takes 3 inputs, expected 2"):
        run_op("Loop", [np.array(1), None], body=LOOP_BODY)
    bad = graph([op_def("Identity", ["acc"], ["a2"])], ["i", "c", "acc"], ["a2", "a2"])
    with pytest.raises(OperatorError, match="'cond \\(body output 0\\)' must hold one"):
        run_op("Loop", [np.array(2), None, rand(3)], body=bad)


# -------------------------------------------------------------------------------- Scan
# body(s, a, b) -> (s + a * b, s + a * b, a - b)
SCAN_BODY = graph(
    [
        op_def("Mul", ["a", "b"], ["ab"]),
        op_def("Add", ["s", "ab"], ["s_out"]),
        op_def("Identity", ["s_out"], ["y1"]),
        op_def("Sub", ["a", "b"], ["y2"]),
    ],
    inputs=["s", "a", "b"],
    outputs=["s_out", "y1", "y2"],
    shapes={"y1": (1, [2]), "y2": (1, [2])},
)


def scan_reference(s, a, b, in_axes, in_dirs, out_axes, out_dirs):
    a, b = (np.moveaxis(v, ax, 0) for v, ax in zip((a, b), in_axes))
    a, b = (v[::-1] if d else v for v, d in zip((a, b), in_dirs))
    y1, y2 = [], []
    for t in range(len(a)):
        s = s + a[t] * b[t]
        y1.append(s)
        y2.append(a[t] - b[t])
    outs = []
    for y, ax, d in zip((y1, y2), out_axes, out_dirs):
        y = np.stack(y) if y else np.empty((0, 2), np.float32)
        outs.append(np.moveaxis(y[::-1] if d else y, 0, ax))
    return (s, *outs)


@pytest.mark.parametrize(
    "in_axes, in_dirs, out_axes, out_dirs",
    [
        (None, None, None, None),
        ([1, 0], [0, 1], [0, 1], [1, 0]),
        ([-1, 0], [1, 1], [-1, -2], [1, 1]),
    ],
)
@pytest.mark.parametrize("length", [3, 0])
def test_scan(in_axes, in_dirs, out_axes, out_dirs, length):
    s = rand(2, seed=4)
    a = rand(length, 2, seed=5)
    b = rand(length, 2, seed=6)
    if in_axes and in_axes[0] != 0:
        a = np.ascontiguousarray(a.T)
    attrs = {
        "scan_input_axes": in_axes,
        "scan_input_directions": in_dirs,
        "scan_output_axes": out_axes,
        "scan_output_directions": out_dirs,
    }
    check_op(
        "Scan",
        [s, a, b],
        lambda s, a, b: scan_reference(
            s, a, b, in_axes or [0, 0], in_dirs or [0, 0], out_axes or [0, 0], out_dirs or [0, 0]
        ),
        body=SCAN_BODY,
        num_scan_inputs=2,
        **{k: v for k, v in attrs.items() if v is not None},
    )


def test_scan_errors():
    with pytest.raises(OperatorError, match="differ in length"):
        run_op("Scan", [rand(2), rand(3, 2), rand(4, 2)], outputs=3, body=SCAN_BODY,
               num_scan_inputs=2)  # fmt: skip
    with pytest.raises(OperatorError, match="scan_input_axes has 1 entries, expected 2"):
        run_op("Scan", [rand(2), rand(3, 2), rand(3, 2)], outputs=3, body=SCAN_BODY,
               num_scan_inputs=2, scan_input_axes=[0])  # fmt: skip
    with pytest.raises(OperatorError, match="axis 2 is out of range"):
        run_op("Scan", [rand(2), rand(3, 2), rand(3, 2)], outputs=3, body=SCAN_BODY,
               num_scan_inputs=2, scan_input_axes=[2, 0])  # fmt: skip
