"""CUDA Cast, CastGradient, Dropout and DropoutGradient (elementwise_cast.cu) against their
NumPy kernels; Dropout's random mask by its statistics."""

import numpy as np
import onnx
import pytest
from elementwise_cases import SHAPES, data, run_device

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_device

TYPES = {
    np.float32: "FLOAT",
    np.float16: "FLOAT16",
    np.float64: "DOUBLE",
    np.int32: "INT32",
    np.int64: "INT64",
    np.bool_: "BOOL",
}
PAIRS = [(a, b) for a in TYPES for b in TYPES]


def values(shape, dtype):
    """Mixed signs, fractions, zeros and whole numbers, all exactly castable to every type
    (float16-exact in range, in int32 range)."""
    x = np.round(data(shape, np.float64, -300, 300) * 4) / 4
    x.reshape(-1)[::5] = 0
    return x.astype(dtype)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{a.__name__}-{b.__name__}" for a, b in PAIRS])
def test_cast(src, dst, shape):
    check_device("Cast", [values(shape, src)], to=TYPES[dst])


@pytest.mark.parametrize("to", ["FLOAT16", onnx.TensorProto.FLOAT16, "float16"])
def test_cast_names_and_numbers(to):
    check_device("Cast", [data((7,), np.float64, -70000, 70000)], to=to)


def test_cast_rounding_and_specials():
    x = np.array([0.1, 1 / 3, 65519.0, 65520.0, 1e-8, np.inf, -np.inf, np.nan], np.float64)
    check_device("Cast", [x], to="FLOAT16")
    check_device("Cast", [x], to="FLOAT")
    check_device("Cast", [x], to="BOOL")
    check_device("Cast", [np.array([2**40 + 1, -(2**35), 7], np.int64)], to="INT32")
    check_device("Cast", [np.array([-2.7, -0.5, 0.5, 2.7, 1e9], np.float32)], to="INT64")


def test_cast_to_a_type_without_a_kernel():
    with pytest.raises(OperatorError, match="no CUDA kernel"):
        run_device("Cast", [np.zeros(3, np.float32)], to="UINT8")


CAST_GRADIENT = [
    (np.float32, np.float16),
    (np.float16, np.float32),
    (np.float64, np.float64),
    (np.int32, np.float32),
    (np.float32, np.int64),
    (np.bool_, np.float32),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "tx,tdy", CAST_GRADIENT, ids=[f"{a.__name__}-{b.__name__}" for a, b in CAST_GRADIENT]
)
def test_cast_gradient(tx, tdy, shape):
    check_device("CastGradient", [values(shape, tx), values(shape, tdy)])


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_cast_gradient_without_doutput(dtype):
    check_device("CastGradient", [values((3, 5), dtype), None])


# --- Dropout ----------------------------------------------------------------------------------

FLOATS = [np.float32, np.float16, np.float64]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "ratio,training",
    [(None, None), (0.3, None), (0.3, False), (0.0, True), (None, False)],
)
def test_dropout_deterministic_modes(ratio, training, shape, dtype):
    """Inference (no or a false training_mode) and ratio 0: the identity, an all-true mask."""
    r = None if ratio is None else np.array(ratio, np.float32)
    t = None if training is None else np.array(training)
    check_device("Dropout", [data(shape, dtype), r, t], outputs=2)


def _train(x, ratio, ws=None, seed=None, device="cuda:0"):
    ws = ws or Workspace()
    ws.feed_blob("x", x, device=device)
    ws.feed_blob("r", np.array([ratio], np.float32), device=device)
    ws.feed_blob("t", np.array([True]), device=device)
    args = {} if seed is None else {"seed": seed}
    ws.run_operator_once(op_def("Dropout", ["x", "r", "t"], ["y", "m"], device=device, **args))
    return ws.fetch_blob("y"), ws.fetch_blob("m")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_dropout_training_statistics(ratio, dtype):
    x = data((200, 501), dtype, 0.5, 2.0)  # never 0, so a kept value is never 0
    y, mask = _train(x, ratio)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert mask.shape == x.shape and mask.dtype == np.bool_
    kept = mask.mean()
    assert abs(kept - (1 - ratio)) < 0.01, kept
    # per row and per column too: no stripes from the hash of the index
    assert abs(mask.mean(axis=1) - (1 - ratio)).max() < 0.12
    assert abs(mask.mean(axis=0) - (1 - ratio)).max() < 0.25
    p = float(np.float32(ratio))  # fed as a float32 tensor
    scale = np.asarray(1.0 / (1.0 - p)).astype(dtype)  # NumPy casts the Python float to dtype
    np.testing.assert_array_equal(y[mask], (x * scale)[mask])
    assert not y[~mask].any()


def test_dropout_masks_change_from_run_to_run_and_follow_the_seed():
    x = data((4096,), np.float32, 0.5, 2.0)
    a = _train(x, 0.5, seed=7)[1]
    b = _train(x, 0.5, seed=7)[1]
    c = _train(x, 0.5, seed=8)[1]
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > 0.3
    ws = Workspace()
    ws.feed_blob("x", x, device="cuda:0")
    ws.feed_blob("t", np.array([True]), device="cuda:0")
    net = NetDef(name="dropout_twice")
    net.op.extend([op_def("Dropout", ["x", "", "t"], ["y", "m"], device="cuda:0", seed=3)])
    ws.create_net(net)
    ws.run_net(net.name)
    first = ws.fetch_blob("m")
    ws.run_net(net.name)
    assert (ws.fetch_blob("m") != first).mean() > 0.3  # the op's stream advances


def test_dropout_refuses_a_ratio_of_one():
    with pytest.raises(OperatorError, match="expected a value in"):
        _train(data((5,), np.float32), 1.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "ratio,training", [(0.25, True), (None, True), (0.25, False), (0.25, None), (0.0, True)]
)
def test_dropout_gradient(ratio, training, shape, dtype):
    mask = data(shape, np.float32, seed=4) > -0.3
    r = None if ratio is None else np.array(ratio, np.float32)
    t = None if training is None else np.array(training)
    check_device("DropoutGradient", [data(shape, dtype), mask, r, t])
