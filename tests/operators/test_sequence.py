"""Sequence ops on Python lists of arrays, against list and NumPy references."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor.runtime import create_runtime
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_op, rand


def run(op_type, inputs, n_out=1, **attrs):
    """Runs one op on a plain dict of blobs, so list inputs stay lists."""
    blobs = {f"in{i}": v for i, v in enumerate(inputs) if v is not None}
    names = ["" if v is None else f"in{i}" for i, v in enumerate(inputs)]
    outs = [f"out{k}" for k in range(n_out)]
    net = NetDef(name="t")
    net.op.append(op_def(op_type, names, outs, **attrs))
    create_runtime(net).run(blobs)
    return [blobs[o] for o in outs]


def same(got, want):
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


SEQ = [rand(2, 3, seed=i) for i in range(3)]


def test_construct_length_empty():
    (seq,) = run("SequenceConstruct", SEQ)
    same(seq, SEQ)
    assert run("SequenceLength", [seq])[0] == np.array(3, np.int64)
    (empty,) = run("SequenceEmpty", [], dtype=7)
    assert empty == []
    with pytest.raises(OperatorError, match="mix dtypes"):
        run("SequenceConstruct", [rand(2), np.ones(2, np.int64)])


@pytest.mark.parametrize("position, at", [(None, 3), (0, 0), (-1, 2), (3, 3), (-3, 0)])
def test_insert(position, at):
    t = rand(2, 3, seed=9)
    pos = None if position is None else np.array(position, np.int64)
    (out,) = run("SequenceInsert", [SEQ, t, pos])
    same(out, [*SEQ[:at], t, *SEQ[at:]])
    assert len(SEQ) == 3  # the input list is not changed


@pytest.mark.parametrize("position", [0, 2, -1, -3])
def test_at(position):
    (out,) = run("SequenceAt", [SEQ, np.array(position, np.int32)])
    np.testing.assert_array_equal(out, SEQ[position])


@pytest.mark.parametrize("position", [None, 0, 1, -1, -3])
def test_erase(position):
    pos = None if position is None else np.array(position, np.int64)
    (out,) = run("SequenceErase", [SEQ, pos])
    want = list(SEQ)
    del want[-1 if position is None else position]
    same(out, want)


def test_position_errors():
    with pytest.raises(OperatorError, match=r"position 3 is out of range \[-3, 2\]"):
        run("SequenceAt", [SEQ, np.array(3)])
    with pytest.raises(OperatorError, match=r"position -4 is out of range \[-3, 3\]"):
        run("SequenceInsert", [SEQ, SEQ[0], np.array(-4)])
    with pytest.raises(OperatorError, match="empty sequence"):
        run("SequenceErase", [[]])
    with pytest.raises(OperatorError, match="must be a sequence"):
        run("SequenceLength", [rand(3)])
    with pytest.raises(OperatorError, match="has dtype int64, the sequence holds float32"):
        run("SequenceInsert", [SEQ, np.ones((2, 3), np.int64)])


X = rand(4, 6, seed=11)


@pytest.mark.parametrize(
    "split, axis, keepdims, want",
    [
        (None, 0, 1, np.split(X, 4, axis=0)),
        (None, 1, 0, [X[:, i] for i in range(6)]),
        (np.array(4), 1, 0, [X[:, :4], X[:, 4:]]),
        (np.array([1, 3]), 0, 0, [X[:1], X[1:]]),
        (np.array([2, 0, 4]), -1, 1, [X[:, :2], X[:, 2:2], X[:, 2:]]),
    ],
)
def test_split_to_sequence(split, axis, keepdims, want):
    (out,) = run("SplitToSequence", [X, split], axis=axis, keepdims=keepdims)
    same(out, want)


def test_split_to_sequence_errors():
    with pytest.raises(OperatorError, match="must be non-negative and sum to the size 4"):
        run("SplitToSequence", [X, np.array([1, 2])])
    with pytest.raises(OperatorError, match="axis 2 is out of range"):
        run("SplitToSequence", [X], axis=2)


@pytest.mark.parametrize("axis, new_axis", [(0, 0), (1, 0), (-1, 0), (0, 1), (2, 1), (-3, 1)])
def test_concat_from_sequence(axis, new_axis):
    (out,) = run("ConcatFromSequence", [SEQ], axis=axis, new_axis=new_axis)
    want = np.stack(SEQ, axis) if new_axis else np.concatenate(SEQ, axis)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(OperatorError, match="the sequence is empty"):
        run("ConcatFromSequence", [[]], axis=0)
    with pytest.raises(OperatorError, match="do not agree"):
        run("ConcatFromSequence", [[rand(2), rand(3)]], axis=0, new_axis=1)


def test_split_concat_roundtrip_check_op():
    # one op per net: split, then concatenate back (check_op feeds arrays only)
    (seq,) = run("SplitToSequence", [X, np.array(2)], axis=1)
    check_op("Identity", [X], lambda x: (np.concatenate(seq, axis=1),))


def body(ops, inputs, outputs):
    net = NetDef(name="body", external_input=inputs, external_output=outputs)
    net.op.extend(ops)
    return net


def test_sequence_map():
    # body(a, b) -> (a + b, shape(a)); b is a sequence or one tensor, `bias` an outer blob
    add = body(
        [op_def("Add", ["a", "b"], ["s"]), op_def("Shape", ["a"], ["shp"])],
        ["a", "b"],
        ["s", "shp"],
    )
    t = rand(2, 3, seed=20)
    sums, shapes = run("SequenceMap", [SEQ, t], n_out=2, body=add)
    same(sums, [s + t for s in SEQ])
    same(shapes, [np.array([2, 3], np.int64)] * 3)
    (sums,) = run("SequenceMap", [SEQ, SEQ[::-1]], body=body([op_def("Add", ["a", "b"], ["s"])],
                  ["a", "b"], ["s"]))  # fmt: skip
    same(sums, [a + b for a, b in zip(SEQ, SEQ[::-1])])
    assert run("SequenceMap", [[], []], body=body([], ["a", "b"], ["a"]))[0] == []
    with pytest.raises(OperatorError, match="additional input 0 has 2 elements"):
        run("SequenceMap", [SEQ, SEQ[:2]], body=body([], ["a", "b"], ["a"]))
