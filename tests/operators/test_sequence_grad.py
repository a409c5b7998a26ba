"""Gradients through tensor sequences (lists of arrays), against central differences."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import rand
from tests.operators.net_gradcheck import check_net_gradient, graph, run_blobs


def f64(*shape, seed=0):
    return rand(*shape, dtype=np.float64, seed=seed)


def pos(p):
    return op_def("Constant", [], [f"p{p}".replace("-", "m")], value=np.array(p, np.int64))


def run(op_type, inputs, n_out=1, **attrs):
    """Runs one op on a plain dict of blobs; None is an omitted input."""
    feeds = {f"in{i}": v for i, v in enumerate(inputs) if v is not None}
    names = ["" if v is None else f"in{i}" for i, v in enumerate(inputs)]
    outs = [f"out{k}" for k in range(n_out)]
    blobs = run_blobs(graph([op_def(op_type, names, outs, **attrs)]), feeds)
    return [blobs[o] for o in outs]


def loss_of(blob):
    return [op_def("Mul", [blob, blob], ["sq"]), op_def("ReduceSum", ["sq"], ["loss"], keepdims=0)]


# --------------------------------------------------------------------- round trips
def test_split_at_concat_round_trip_sums_sequence_partials():
    # S = split(x, axis 1); y = S[0] * S[-1] + concat(S) summed: S has three readers
    ops = [
        op_def("SplitToSequence", ["x"], ["S"], axis=1),
        pos(0),
        pos(-1),
        op_def("SequenceAt", ["S", "p0"], ["first"]),
        op_def("SequenceAt", ["S", "pm1"], ["last"]),
        op_def("Mul", ["first", "last"], ["fl"]),
        op_def("ConcatFromSequence", ["S"], ["back"], axis=1),
        op_def("Mul", ["back", "w"], ["bw"]),
        op_def("ReduceSum", ["fl"], ["a"], keepdims=0),
        op_def("ReduceSum", ["bw"], ["b"], keepdims=0),
        op_def("Add", ["a", "b"], ["loss"]),
    ]
    net = graph(ops)
    from netbrew.netdef.autodiff import add_gradient_ops

    add_gradient_ops(net, ["loss"], wrt=["x"])
    assert any(op.type == "Sum" for op in net.op)  # the partials of S are lists, summed
    x, w = f64(2, 3, 1), f64(2, 3, 1, seed=1)
    got = check_net_gradient(ops, {"x": x, "w": w}, ["x", "w"])
    want = w.copy()
    want[:, 0] += x[:, 2]
    want[:, 2] += x[:, 0]
    np.testing.assert_allclose(got["x"], want)


@pytest.mark.parametrize("insert_at, erase_at", [(None, None), (0, 1), (-1, -3), (3, 0)])
def test_construct_insert_erase_stack(insert_at, erase_at):
    ops = [op_def("SequenceConstruct", ["a", "b", "c"], ["S"])]
    insert_in = ["S", "d"]
    if insert_at is not None:
        ops.append(pos(insert_at))
        insert_in.append(ops[-1].output[0])
    ops.append(op_def("SequenceInsert", insert_in, ["S2"]))
    erase_in = ["S2"]
    if erase_at is not None:
        ops.append(op_def("Constant", [], ["e"], value=np.array(erase_at, np.int32)))
        erase_in.append("e")
    ops += [
        op_def("SequenceErase", erase_in, ["S3"]),
        op_def("ConcatFromSequence", ["S3"], ["y"], axis=-1, new_axis=1),
        *loss_of("y"),
    ]
    feeds = {k: f64(2, 2, seed=i) for i, k in enumerate("abcd")}
    got = check_net_gradient(ops, feeds, list("abcd"))
    erased = sum(not got[k].any() for k in "abcd")
    assert erased == 1  # the erased tensor gets zeros


@pytest.mark.parametrize(
    "split, keepdims, axis",
    [(None, 1, 0), (None, 0, 1), (None, 0, -1), (2, 1, 1), ([1, 0, 3], 0, 1)],
)
def test_split_to_sequence_variants(split, keepdims, axis):
    ops = []
    inputs = ["x"]
    if split is not None:
        ops.append(op_def("Constant", [], ["split"], value=np.array(split, np.int64)))
        inputs.append("split")
    ops += [
        op_def("SplitToSequence", inputs, ["S"], axis=axis, keepdims=keepdims),
        op_def("SequenceLength", ["S"], ["n"]),
        op_def("Constant", [], ["one"], value=np.array(1, np.int64)),
        op_def("Sub", ["n", "one"], ["last_index"]),
        op_def("SequenceAt", ["S", "last_index"], ["last"]),
        op_def("Sin", ["last"], ["s"]),
        op_def("ReduceSum", ["s"], ["loss"], keepdims=0),
    ]
    check_net_gradient(ops, {"x": f64(3, 4)}, ["x"])


def test_sequence_fed_directly_and_concat_new_axis():
    ops = [
        op_def("ConcatFromSequence", ["S"], ["y"], axis=0, new_axis=1),
        op_def("Mul", ["y", "w"], ["yw"]),
        *loss_of("yw"),
    ]
    seq = [f64(2, 3, seed=i) for i in range(3)]
    got = check_net_gradient(ops, {"S": seq, "w": f64(3, 2, 3, seed=9)}, ["S", "w"])
    assert isinstance(got["S"], list) and len(got["S"]) == 3


def test_loop_carries_a_growing_sequence():
    # body(i, c, S) -> (c, S + [x * i-th power]); loss on concat of the final sequence
    body = graph(
        [
            op_def("SequenceAt", ["S", "minus_one"], ["prev"]),
            op_def("Mul", ["prev", "x"], ["nxt"]),
            op_def("SequenceInsert", ["S", "nxt"], ["S2"]),
        ],
        ["i", "c", "S"],
        ["c", "S2"],
    )
    ops = [
        op_def("SequenceConstruct", ["x"], ["S0"]),
        op_def("Loop", ["m", "", "S0"], ["S"], body=body),
        op_def("ConcatFromSequence", ["S"], ["y"], axis=0),
        *loss_of("y"),
    ]
    feeds = {"x": f64(2) + 1.5, "m": np.array(3, np.int64), "minus_one": np.array(-1, np.int64)}
    got = check_net_gradient(ops, feeds, ["x"])
    x = feeds["x"]  # loss = sum_k x^(2k), k = 1..4
    np.testing.assert_allclose(got["x"], sum(2 * k * x ** (2 * k - 1) for k in range(1, 5)))


# ----------------------------------------------------------------------- SequenceMap
def test_sequence_map_sequence_tensor_and_captured_inputs():
    # out[i] = S[i] * T[i] * w + b: T a sequence input, w a tensor passed whole, b captured
    body = graph(
        [
            op_def("Mul", ["s", "t"], ["st"]),
            op_def("Mul", ["st", "w_in"], ["stw"]),
            op_def("Add", ["stw", "b"], ["o"]),
            op_def("Shape", ["o"], ["shape"]),
        ],
        ["s", "t", "w_in"],
        ["o", "shape"],
    )
    ops = [
        op_def("SplitToSequence", ["x"], ["S"], axis=0, keepdims=0),
        op_def("SequenceMap", ["S", "T", "w"], ["O", "shapes"], body=body),
        op_def("ConcatFromSequence", ["O"], ["y"], axis=0),
        *loss_of("y"),
    ]
    feeds = {
        "x": f64(3, 2),
        "T": [f64(2, seed=i) for i in range(1, 4)],
        "w": f64(2, seed=7),
        "b": f64(2, seed=8),
    }
    got = check_net_gradient(ops, feeds, ["x", "T", "w", "b"])
    assert isinstance(got["T"], list) and got["w"].shape == (2,)


def test_sequence_map_with_an_integer_sequence_and_an_empty_sequence():
    # out[i] = Gather(x, idx[i]): idx holds integers and gets zeros
    body = graph([op_def("Gather", ["xs", "idx"], ["o"], axis=0)], ["idx", "xs"], ["o"])
    ops = [
        op_def("SequenceMap", ["I", "x"], ["O"], body=body),
        op_def("ConcatFromSequence", ["O"], ["y"], axis=0),
        *loss_of("y"),
    ]
    feeds = {"I": [np.array([0, 2]), np.array([2])], "x": f64(3)}
    got = check_net_gradient(ops, feeds, ["x"])
    np.testing.assert_allclose(got["x"], [2 * feeds["x"][0], 0, 4 * feeds["x"][2]])
    op = op_def("SequenceMap", ["E", "x"], ["O"], body=body)
    (grad_op,) = GRADIENTS["SequenceMap"](op, ["dO"], ["dE", "dx"])
    blobs = run_blobs(graph([grad_op]), {"E": [], "x": f64(3), "dO": []})
    assert blobs["dE"] == [] and not blobs["dx"].any()


def test_sequence_map_gradient_errors():
    body = graph([op_def("Neg", ["s"], ["o"])], ["s"], ["o"])
    seq = [f64(2)]
    with pytest.raises(OperatorError, match="gradient of out_sequence 0 has 2 tensors"):
        run("SequenceMapGradient", [seq, [f64(2), f64(2)]], body=body)
    with pytest.raises(OperatorError, match="got 1 inputs, a body of 1 inputs and 1 outputs"):
        run("SequenceMapGradient", [seq], body=body)


# ------------------------------------------------------------------ gradient ops alone
def test_gradient_ops_directly():
    seq = [f64(2, seed=i) for i in range(3)]
    dy = f64(2, seed=5)
    (ds,) = run("SequenceAtGradient", [seq, np.array(-2), dy])
    np.testing.assert_array_equal(ds[1], dy)
    assert not ds[0].any() and not ds[2].any()
    d_in, d_t = run("SequenceInsertGradient", [seq, None], n_out=2)
    assert len(d_in) == 2 and d_t is seq[2]
    (ds,) = run("SequenceEraseGradient", [seq, seq[1:], np.array(0)])
    assert not ds[0].any() and ds[1] is seq[1]
    (dx,) = run("SplitToSequenceGradient", [np.zeros((0, 2)), []], axis=0)
    assert dx.shape == (0, 2)
    outs = run("SequenceConstructGradient", [seq], n_out=3)
    assert all(o is s for o, s in zip(outs, seq))


def test_gradient_op_errors():
    seq = [f64(2, seed=i) for i in range(3)]
    with pytest.raises(OperatorError, match="dY has shape \\[3\\], expected \\[2\\]"):
        run("SequenceAtGradient", [seq, np.array(0), f64(3)])
    with pytest.raises(OperatorError, match="has 3 tensors, the op lists 2 outputs"):
        run("SequenceConstructGradient", [seq], n_out=2)
    with pytest.raises(OperatorError, match="has 1 tensors, expected 2"):
        run("SequenceEraseGradient", [seq, seq[:1]])
    with pytest.raises(OperatorError, match="is empty; an insert gives one"):
        run("SequenceInsertGradient", [[]], n_out=2)
    with pytest.raises(OperatorError, match="dY has 5 entries on axis 0, .* give 6"):
        run("ConcatFromSequenceGradient", [seq, f64(5)], axis=0)
    with pytest.raises(OperatorError, match="expected \\[4, 2\\]"):
        run("SplitToSequenceGradient", [f64(4, 2), [f64(1, 2)] * 3], axis=0)


def test_sum_adds_sequences_elementwise_and_refuses_mixtures():
    a, b = [f64(2), f64(3)], [f64(2, seed=1), f64(3, seed=1)]
    (total,) = run("Sum", [a, b])
    for t, x, y in zip(total, a, b):
        np.testing.assert_allclose(t, x + y)
    with pytest.raises(OperatorError, match="inputs mix sequences and tensors"):
        run("Sum", [a, f64(2)])
    with pytest.raises(OperatorError, match="differ in length: \\[2, 1\\]"):
        run("Sum", [a, a[:1]])


def test_loop_fills_a_sequence_that_starts_empty():
    # S0 = []; body(i, c, S) -> (c, S + [x * w]); the carried sequence holds floats only
    # after the first iteration, and still carries the gradient back to x and w
    body = graph(
        [op_def("Mul", ["x", "w"], ["xw"]), op_def("SequenceInsert", ["S", "xw"], ["S2"])],
        ["i", "c", "S"],
        ["c", "S2"],
    )
    ops = [
        op_def("SequenceEmpty", [], ["S0"], dtype=np.float64),
        op_def("Loop", ["m", "", "S0"], ["S"], body=body),
        op_def("ConcatFromSequence", ["S"], ["y"], axis=0),
        *loss_of("y"),
    ]
    feeds = {"x": f64(2), "w": f64(2, seed=1), "m": np.array(3, np.int64)}
    got = check_net_gradient(ops, feeds, ["x", "w"])
    np.testing.assert_allclose(got["x"], 3 * 2 * feeds["x"] * feeds["w"] ** 2)
