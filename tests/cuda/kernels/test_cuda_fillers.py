"""CUDA fillers: the CPU kernel's numbers (same seed, same rng), uploaded to the GPU."""

import numpy as np
import pytest

from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.tensor import DT
from netbrew.proto.netbrew_pb2 import DeviceOption
from netbrew.testing import rand


def run(op, inputs, device_type, seed, **attrs):
    """The op's output on the CPU (0) or cuda:0 (1), its random stream seeded by `seed`
    through its device option, as an init net's random_seed does; and where it was left."""
    ws = Workspace()
    for i, x in enumerate(inputs):
        ws.feed_blob(f"in{i}", x, device="cuda:0" if device_type else None)
    option = DeviceOption(device_type=device_type, device_id=0, random_seed=seed)
    names = [f"in{i}" for i in range(len(inputs))]
    ws.run_operator_once(op_def(op, names, ["y"], device=option, **attrs))
    return ws.fetch_blob("y"), ws.blob_device("y")


def exact(op, inputs, seed=0, **attrs):
    """The GPU output equals the CPU output bit for bit (same seed), and stays on the GPU."""
    expected, _ = run(op, inputs, 0, seed, **attrs)
    got, where = run(op, inputs, 1, seed, **attrs)
    assert where == "cuda", f"{op} left its output on the {where}"
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
    np.testing.assert_array_equal(got, expected, err_msg=op)


@pytest.mark.parametrize(
    "inputs, attrs",
    [
        ([], {"shape": [3, 4], "value": 2.5}),
        ([], {"shape": [5], "value": 7}),
        ([], {"shape": [3, 1], "value": 1.0, "dtype": DT.INT32}),
        ([], {"shape": [2], "value": 1.0, "dtype": DT.BOOL}),
        ([], {"shape": [2, 0], "value": -1.5, "dtype": DT.DOUBLE}),
        ([], {"shape": [], "value": 3.0}),
        ([rand(2, 3)], {"value": 4.0, "extra_shape": [5]}),
        ([np.array([2, 3], np.int64)], {"value": 1.0, "input_as_shape": 1}),
    ],
)
def test_constant_fill(inputs, attrs):
    exact("ConstantFill", inputs, **attrs)


@pytest.mark.parametrize(
    "op, values",
    [
        ("GivenTensorFill", [0.5, -1.0, 2.0, 3.25, 4.0, 5.0]),
        ("GivenTensorDoubleFill", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
        ("GivenTensorIntFill", [1, -2, 3, 4, 5, 2**31 - 1]),
        ("GivenTensorInt64Fill", [1, 2, 3, 4, 5, 2**40]),
        ("GivenTensorBoolFill", [1, 0, 0, 1, 1, 0]),
        ("GivenTensorInt16Fill", [1, -2, 3, -4, 5, 300]),
    ],
)
@pytest.mark.parametrize("shape", [(6,), (2, 3)])
def test_given_tensor_fill(op, values, shape):
    exact(op, [], shape=list(shape), values=values)


def test_given_tensor_fill_dtype():
    exact("GivenTensorFill", [], shape=[2], values=[1.0, 2.0], dtype=DT.DOUBLE)


@pytest.mark.parametrize("op", ["GaussianFill", "UniformFill", "XavierFill", "MSRAFill"])
@pytest.mark.parametrize("shape", [[4, 3], [7, 5, 3], [0, 3]])
def test_random_fills_match_the_cpu_for_a_seed(op, shape):
    exact(op, [], shape=shape, seed=11)


def test_random_fill_arguments():
    exact("GaussianFill", [], shape=[50], mean=3.0, std=0.5, seed=1)
    exact("UniformFill", [], shape=[50], min=-2.0, max=5.0, seed=2)
    exact(
        "UniformFill",
        [rand(3, 4), np.array([1.0], np.float32), np.array([2.0], np.float32)],
        seed=3,
    )
    exact("XavierFill", [np.array([6, 4], np.int64)], input_as_shape=1, seed=4)
    exact("MSRAFill", [rand(2, 3)], extra_shape=[4], seed=5)


@pytest.mark.parametrize(
    "shape, value",
    [
        ((2, 3), None),
        ((4,), np.array([7], np.int32)),
        ((0, 2), np.array([1.5], np.float64)),
        ((), np.array([True])),
    ],
)
def test_constant_of_shape(shape, value):
    attrs = {} if value is None else {"value": value}
    exact("ConstantOfShape", [np.array(shape, np.int64)], **attrs)
