"""ConvShuffle: a Conv (and Relu) then the Reshape -> Transpose -> Reshape channel shuffle,
against those ops run one by one (and PyTorch's channel_shuffle where installed)."""

from __future__ import annotations

import numpy as np
import pytest

from netbrew import jit
from netbrew.errors import ShapeError
from netbrew.operators import conv_shuffle as conv_shuffle_module
from netbrew.operators.conv import conv_cpu
from netbrew.operators.conv_last import channels_last
from netbrew.operators.conv_shuffle import conv_shuffle_cpu, shuffle_groups
from netbrew.operators.shape import reshape_cpu, transpose_cpu


def three_ops(x, w, b, grouped_shape, shape, relu, **attrs):
    """Conv, Relu, Reshape, Transpose, Reshape, as the net ran them before the fold."""
    (y,) = conv_cpu(x, w, b, **attrs)
    if relu:
        y = np.maximum(y, 0)
    (r,) = reshape_cpu(y, np.array(grouped_shape), 0)
    (t,) = transpose_cpu(r, [0, 2, 1, *range(3, r.ndim)])
    (z,) = reshape_cpu(t, np.array(shape), 0)
    return z


def operands(x_shape, m, kernel, group, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((m, x_shape[1] // group, *kernel)).astype(dtype)
    return x, w, rng.standard_normal(m).astype(dtype)


CASES = [
    # x shape, M, kernel, group, conv attrs, grouped_shape, shape
    ((1, 24, 8, 8), 32, (1, 1), 4, {}, [1, 4, 8, 8, 8], [1, 32, 8, 8]),  # ShuffleNet's
    ((2, 24, 7, 6), 32, (1, 1), 4, {}, [0, 4, -1, 7, 6], [0, -1, 7, 6]),  # 0 and -1
    ((1, 12, 9, 9), 24, (3, 3), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}, [1, 3, 8, 5, 5],
     [1, 24, 5, 5]),  # a strided 3x3 grouped conv: im2col, written shuffled
    ((1, 8, 5, 5), 12, (1, 1), 1, {}, [1, 3, 4, 5, 5], [1, 12, 5, 5]),  # ungrouped: one copy
    ((1, 8, 6, 6), 8, (3, 3), 8, {"pads": [1, 1, 1, 1]}, [1, 2, 4, 6, 6], [1, 8, 6, 6]),
    # depthwise (its own path), then shuffled by a copy
    ((1, 16, 4, 4), 16, (1, 1), 4, {}, [1, 8, 2, 16], [1, 16, 16]),  # not a shuffle of Y
]  # fmt: skip


@pytest.mark.parametrize("x_shape, m, kernel, group, attrs, grouped, shape", CASES)
@pytest.mark.parametrize("relu", [0, 1])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_the_ops_it_folds(
    x_shape, m, kernel, group, attrs, grouped, shape, relu, with_bias
):
    x, w, b = operands(x_shape, m, kernel, group)
    b = b if with_bias else None
    (got,) = conv_shuffle_cpu(
        x, w, b, grouped_shape=grouped, shape=shape, relu=relu, group=group, **attrs
    )
    want = three_ops(x, w, b, grouped, shape, relu, group=group, **attrs)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if relu:
        assert got.min() == 0


def test_float64_and_the_direct_path_taken(spy):
    calls = spy(conv_shuffle_module, "_grouped_into_shuffled")
    x, w, b = operands((1, 12, 6, 6), 24, (1, 1), 4, np.float64, seed=1)
    shapes = dict(grouped_shape=[1, 4, 6, 6, 6], shape=[1, 24, 6, 6])
    (got,) = conv_shuffle_cpu(x, w, b, group=4, **shapes)
    assert got.dtype == np.float64 and calls == [(24, 3, 1, 1)]
    np.testing.assert_allclose(got, three_ops(x, w, b, relu=0, group=4, **shapes), atol=1e-12)
    # a shuffle in 3 groups of a 4-group conv: computed as Conv, then one copy
    conv_shuffle_cpu(x, w, b, group=4, grouped_shape=[1, 3, 8, 6, 6], shape=[1, 24, 6, 6])
    assert len(calls) == 1


def test_shuffle_groups_reads_the_shapes_as_reshape_does():
    assert shuffle_groups((2, 24, 5, 5), [0, 4, -1, 5, 5], [0, -1, 5, 5]) == 4
    # 0 copies a dim of the swapped (2, 6, 4, 5, 5), as Reshape does: (2, 24, 4, 5)
    with pytest.raises(ShapeError, match="holds 960 elements"):
        shuffle_groups((2, 24, 5, 5), [0, 4, -1, 5, 5], [2, 24, 0, 0])
    assert shuffle_groups((2, 24, 5, 5), [2, 4, 6, 25], [2, 24, 25]) is None  # spatial merged
    assert shuffle_groups((2, 24, 5, 5), [2, 4, 6, 5, 5], [2, 6, 4, 25]) is None  # not back
    with pytest.raises(ShapeError, match=r"Reshape of data \[2, 24, 5, 5\].*holds 2400"):
        shuffle_groups((2, 24, 5, 5), [2, 4, 6, 5, 10], [2, 24, 5, 5])


def test_bad_shapes_fail_as_reshape_would():
    x, w, b = operands((1, 8, 4, 4), 8, (1, 1), 2)
    with pytest.raises(ShapeError, match="at most one dimension may be -1"):
        conv_shuffle_cpu(x, w, b, group=2, grouped_shape=[1, -1, -1, 4, 4], shape=[1, 8, 4, 4])
    with pytest.raises(ShapeError, match="input X has C=8 channels"):
        conv_shuffle_cpu(x, w[:, :1], b, group=2, grouped_shape=[1, 2, 4, 4, 4], shape=[0])


def test_matches_torch_channel_shuffle():
    torch = pytest.importorskip("torch")
    x, w, b = operands((2, 24, 10, 10), 48, (1, 1), 4, seed=2)
    (got,) = conv_shuffle_cpu(
        x, w, b, group=4, relu=1, grouped_shape=[2, 4, 12, 10, 10], shape=[2, 48, 10, 10]
    )
    conv = torch.nn.functional.conv2d(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), groups=4
    )
    want = torch.nn.functional.channel_shuffle(torch.relu(conv), 4)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_runs_as_an_op_in_a_net():
    from netbrew.executor import Workspace
    from netbrew.netdef import op_def

    x, w, b = operands((1, 8, 3, 3), 8, (1, 1), 2, seed=3)
    shapes = dict(grouped_shape=[1, 2, 4, 3, 3], shape=[1, 8, 3, 3])
    ws = Workspace()
    for name, value in (("x", x), ("w", w), ("b", b)):
        ws.feed_blob(name, value)
    ws.run_operator_once(op_def("ConvShuffle", ["x", "w", "b"], ["y"], group=2, relu=1, **shapes))
    want = three_ops(x, w, b, relu=1, group=2, **shapes)
    np.testing.assert_allclose(ws.fetch_blob("y"), want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not jit.enabled(), reason="numba missing or NETBREW_JIT=0")
@pytest.mark.parametrize("relu", [0, 1])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("min_elements", [0, 10**12], ids=["parallel", "serial"])
@pytest.mark.parametrize("group", [2, 3, 4, 5])  # 2-4 have their own interleaving loops
def test_channels_last_input_answers_channels_last_shuffled(
    relu, with_bias, min_elements, group, monkeypatch, spy
):
    """ShuffleNet's units hand the grouped 1x1 conv a channels-last X (the previous unit's
    output): its GEMMs read the channel blocks in place, and bias, Relu and the shuffle
    run in one pass into channels-last memory."""
    monkeypatch.setattr(conv_shuffle_module, "PARALLEL_MIN_ELEMENTS", min_elements)
    calls = spy(conv_shuffle_module, "_pointwise_shuffled")
    x, w, b = operands((2, 16 * group, 5, 7), 24 * group, (1, 1), group, seed=3)
    b = b if with_bias else None
    shapes = dict(grouped_shape=[2, group, 24, 5, 7], shape=[2, 24 * group, 5, 7])
    want = three_ops(x, w, b, relu=relu, group=group, **shapes)
    last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    (got,) = conv_shuffle_cpu(last, w, b, group=group, relu=relu, **shapes)
    assert len(calls) == 1 and channels_last(got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # however narrow the groups (ShuffleNet's first unit: 6 channels a group)
    x, w, b = operands((1, 24, 5, 5), 32, (1, 1), 4, seed=4)
    last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    shapes = dict(grouped_shape=[1, 4, 8, 5, 5], shape=[1, 32, 5, 5])
    (got,) = conv_shuffle_cpu(last, w, b, group=4, **shapes)
    assert len(calls) == 2 and channels_last(got)
    np.testing.assert_allclose(got, three_ops(x, w, b, relu=0, group=4, **shapes), atol=1e-5)
