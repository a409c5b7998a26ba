"""Caffe2's fillers: exact values for the deterministic ones, statistics for the random ones."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef.tensor import DT
from netbrew.testing import check_op, run_op


@pytest.mark.parametrize(
    "inputs, attrs, shape, dtype, value",
    [
        ([], {"shape": [2, 3]}, (2, 3), np.float32, 0.0),
        ([], {"shape": [4], "value": 2.5}, (4,), np.float32, 2.5),
        ([], {"shape": [2], "value": 7}, (2,), np.int64, 7),  # int value, no dtype: INT64
        ([], {"shape": [3, 1], "value": 1.0, "dtype": DT.INT32}, (3, 1), np.int32, 1),
        ([], {"shape": [2], "value": 1.0, "dtype": DT.BOOL}, (2,), np.bool_, True),
        ([], {"shape": [2], "value": -1.5, "dtype": DT.DOUBLE}, (2,), np.float64, -1.5),
        ([], {"shape": [], "value": 3.0}, (), np.float32, 3.0),
        ([np.zeros((2, 5), np.int8)], {"value": 4.0}, (2, 5), np.float32, 4.0),
        ([np.zeros((2,))], {"extra_shape": [3]}, (2, 3), np.float32, 0.0),
        ([np.array([3, 2], np.int64)], {"input_as_shape": 1}, (3, 2), np.float32, 0.0),
        ([np.array([1, 2])], {"input_as_shape": 1, "extra_shape": [2]}, (1, 2, 2), np.float32, 0),
        ([], {"shape": [2], "value": "ab", "dtype": DT.STRING}, (2,), object, "ab"),
    ],
)
def test_constant_fill(inputs, attrs, shape, dtype, value):
    check_op("ConstantFill", inputs, reference=lambda *_: (np.full(shape, value, dtype),), **attrs)


@pytest.mark.parametrize(
    "op, values, dtype",
    [
        ("GivenTensorFill", [0.5, -1.0, 2.0, 3.25, 4.0, 5.0], np.float32),
        ("GivenTensorDoubleFill", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], np.float64),
        ("GivenTensorIntFill", [1, -2, 3, 4, 5, 2**31 - 1], np.int32),
        ("GivenTensorInt64Fill", [1, 2, 3, 4, 5, 2**40], np.int64),
        ("GivenTensorBoolFill", [1, 0, 0, 1, 1, 0], np.bool_),
        ("GivenTensorInt16Fill", [1, -2, 3, -4, 5, 300], np.int16),
        ("GivenTensorStringFill", ["a", "bc", "", "d", "e", "f"], object),
    ],
)
@pytest.mark.parametrize("shape", [(6,), (2, 3), (3, 1, 2)])
def test_given_tensor_fill(op, values, dtype, shape):
    if op == "GivenTensorStringFill":  # bytes, as Caffe2's std::string values
        values_out = [v.encode() for v in values]
        expected = np.empty(len(values_out), object)
        expected[:] = values_out
        expected = expected.reshape(shape)
    else:
        expected = np.array(values, dtype=dtype).reshape(shape)
    check_op(op, [], reference=lambda: (expected,), shape=list(shape), values=values)


def test_given_tensor_fill_dtype_and_input_shape():
    check_op(
        "GivenTensorFill",
        [],
        reference=lambda: (np.array([1.0, 2.0], np.float64),),
        shape=[2],
        values=[1.0, 2.0],
        dtype=DT.DOUBLE,
    )
    check_op(
        "GivenTensorIntFill",
        [np.zeros((2, 2))],
        reference=lambda x: (np.arange(4, dtype=np.int32).reshape(2, 2),),
        values=[0, 1, 2, 3],
    )


@pytest.mark.parametrize(
    "inputs, attrs, shape",
    [
        ([], {"shape": [400, 500]}, (400, 500)),
        ([], {"shape": [200, 1000], "mean": 2.0, "std": 3.0}, (200, 1000)),
        ([np.zeros((100, 2000))], {"std": 0.5}, (100, 2000)),
        ([np.array([200, 1000])], {"input_as_shape": 1, "mean": -1.0}, (200, 1000)),
    ],
)
def test_gaussian_fill(inputs, attrs, shape):
    (out,) = run_op("GaussianFill", inputs, **attrs)
    assert out.shape == shape and out.dtype == np.float32
    assert abs(out.mean() - attrs.get("mean", 0.0)) < 0.02 * attrs.get("std", 1.0) + 0.01
    assert abs(out.std() - attrs.get("std", 1.0)) < 0.01 * attrs.get("std", 1.0) + 0.005


@pytest.mark.parametrize(
    "inputs, attrs, shape, low, high",
    [
        ([], {"shape": [200, 1000]}, (200, 1000), 0.0, 1.0),
        ([], {"shape": [100000], "min": -2.0, "max": 5.0}, (100000,), -2.0, 5.0),
        ([np.zeros((1000, 100))], {"min": 3, "max": 4}, (1000, 100), 3.0, 4.0),
        (
            [np.array([1000, 100]), np.array(-1.0), np.array(1.0)],
            {"input_as_shape": 1},
            (1000, 100),
            -1.0,
            1.0,
        ),
    ],
)
def test_uniform_fill(inputs, attrs, shape, low, high):
    (out,) = run_op("UniformFill", inputs, **attrs)
    assert out.shape == shape and out.dtype == np.float32
    assert out.min() >= low and out.max() <= high
    assert abs(out.mean() - (low + high) / 2) < 0.01 * (high - low)
    assert abs(out.std() - (high - low) / np.sqrt(12)) < 0.01 * (high - low)


def test_uniform_fill_min_above_max_inputs_gives_empty():
    (out,) = run_op("UniformFill", [np.zeros((3, 4)), np.array(2.0), np.array(1.0)])
    assert out.shape == (0, 4)


@pytest.mark.parametrize("shape", [(400, 500), (64, 30, 3, 3), (1000, 50)])
def test_xavier_fill(shape):
    (out,) = run_op("XavierFill", [], shape=list(shape))
    scale = np.sqrt(3.0 / (np.prod(shape) // shape[0]))
    assert out.shape == shape and out.dtype == np.float32
    assert np.abs(out).max() <= scale * (1 + 1e-6)
    assert abs(out.std() - scale / np.sqrt(3)) < 0.02 * scale


@pytest.mark.parametrize("shape", [(400, 500), (64, 30, 3, 3), (30, 64, 5, 5)])
def test_msra_fill(shape):
    (out,) = run_op("MSRAFill", [], shape=list(shape))
    std = np.sqrt(2.0 / (np.prod(shape) // shape[1]))
    assert out.shape == shape and out.dtype == np.float32
    assert abs(out.mean()) < 0.02 * std
    assert abs(out.std() - std) < 0.02 * std


def test_random_fills_follow_the_device_seed():
    from netbrew.executor import Workspace
    from netbrew.netdef import op_def

    def fill(seed):
        ws = Workspace()
        op = op_def("GaussianFill", [], ["y"], shape=[5], device=None)
        op.device_option.random_seed = seed
        ws.run_operator_once(op)
        return ws.fetch_blob("y")

    np.testing.assert_array_equal(fill(3), fill(3))
    assert (fill(3) != fill(4)).any()


@pytest.mark.parametrize(
    "op",
    [
        "ConstantFill",
        "GaussianFill",
        "UniformFill",
        "XavierFill",
        "MSRAFill",
        "GivenTensorFill",
        "GivenTensorInt64Fill",
    ],
)
def test_huge_shape_is_refused_before_allocating(op):
    with pytest.raises(OperatorError, match="1,000,000,000,000 elements"):
        run_op(op, [], shape=[10**6, 10**6])


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        (
            "GivenTensorFill",
            [],
            {"shape": [2, 3], "values": [1.0, 2.0]},
            r"values has 2 entries, but shape \[2, 3\] needs 6",
        ),
        ("GivenTensorStringFill", [], {"shape": [3], "values": ["a"]}, "values has 1 entries"),
        ("ConstantFill", [np.zeros(3)], {"shape": [2]}, "got both the shape argument and an input"),
        ("ConstantFill", [], {"shape": [2], "input_as_shape": 1}, "needs an input"),
        ("ConstantFill", [], {"shape": [2], "extra_shape": [3]}, "extra_shape needs an input"),
        ("ConstantFill", [np.zeros((2, 2))], {"input_as_shape": 1}, "must be a 1-D integer"),
        ("ConstantFill", [], {"shape": [-1, 2]}, "has a negative dimension"),
        ("UniformFill", [], {"shape": [2], "min": 2.0, "max": 1.0}, "min=2.0 is greater"),
        ("GaussianFill", [], {"shape": [2], "std": -1.0}, "std is -1.0"),
        ("XavierFill", [], {"shape": []}, "no dim 0"),
        ("MSRAFill", [], {"shape": [4]}, "no dim 1"),
    ],
)
def test_errors(op, inputs, attrs, match):
    with pytest.raises(OperatorError, match=match):
        run_op(op, inputs, **attrs)


def test_an_unknown_dtype_is_refused_when_built_and_when_run():
    from netbrew.errors import SchemaError
    from netbrew.executor import Workspace
    from netbrew.netdef import op_def

    with pytest.raises(SchemaError, match="ConstantFill: argument dtype=99 is not a tensor type"):
        op_def("ConstantFill", [], ["y"], shape=[2], dtype=99)
    raw = op_def("ConstantFill", [], ["y"], shape=[2])
    raw.arg.add(name="dtype", i=99)  # as a NetDef file may hold it
    with pytest.raises(OperatorError, match="has no numpy equivalent"):
        Workspace().run_operator_once(raw)
