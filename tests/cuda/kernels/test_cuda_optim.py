"""CUDA WeightedSum, MomentumSGDUpdate and Adam (optim.cu) against their NumPy kernels."""

import numpy as np
import pytest
from elementwise_cases import SHAPES, check_outputs, data, run_device

from netbrew.cuda import to_gpu, to_host
from netbrew.errors import OperatorError, ShapeError
from netbrew.operators.cuda.optim import (
    MULTI,
    momentum_sgd_update_batched_cuda,
    weighted_sum_batched_cuda,
)
from netbrew.operators.train import momentum_sgd_update_cpu, weighted_sum_cpu
from netbrew.testing import check_device

FLOATS = [np.float32, np.float16, np.float64]
# float16: the CPU rounds every intermediate to float16, the GPU keeps them in float32.
TOL = {
    np.float32: {"atol": 1e-5, "rtol": 1e-5},
    np.float16: {"atol": 5e-3, "rtol": 5e-3},
    np.float64: {"atol": 1e-12, "rtol": 1e-12},
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("pairs", [1, 2, 3])
def test_weighted_sum(pairs, shape, dtype):
    inputs = []
    for i in range(pairs):
        weight = np.array([0.5 - 0.7 * i], np.float32).reshape((1,) if i % 2 else ())
        inputs += [data(shape, dtype, seed=i), weight]
    check_device("WeightedSum", inputs, **TOL[dtype])


def test_weighted_sum_refuses_odd_inputs_and_long_weights():
    x = data((4,), np.float32)
    with pytest.raises(OperatorError, match="expected pairs"):
        run_device("WeightedSum", [x, np.ones(1, np.float32), x])
    with pytest.raises(OperatorError, match="expected one value"):
        run_device("WeightedSum", [x, np.ones(2, np.float32)])


GRAD_DTYPES = [
    (np.float32, np.float32),
    (np.float16, np.float32),
    (np.float64, np.float64),
    (np.float16, np.float16),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tx,tdy", GRAD_DTYPES)
@pytest.mark.parametrize(
    "outputs,with_x",
    [(["dx", "dw"], True), (["dx", ""], True), (["dx", ""], False), (["", "dw"], True)],
    ids=["both", "dX", "dX-without-X", "dweight"],
)
def test_weighted_sum_gradient(outputs, with_x, tx, tdy, shape):
    dy, x = data(shape, tdy, seed=1), data(shape, tx, seed=2)
    weight = np.array([-0.7], np.float32).reshape(() if tx == np.float16 else (1,))
    tol = TOL[tx] if tdy == tx else TOL[np.float16]
    check_outputs("WeightedSumGradient", [dy, weight, x if with_x else None], outputs, **tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nesterov", [0, 1])
@pytest.mark.parametrize("momentum", [0.9, 0.5])
def test_momentum_sgd_update(momentum, nesterov, shape, dtype):
    grad, moment, param = (data(shape, dtype, seed=i) for i in range(3))
    lr = np.array([0.1], np.float32)
    check_device(
        "MomentumSGDUpdate",
        [grad, moment, lr, param],
        outputs=3,
        momentum=momentum,
        nesterov=nesterov,
        **TOL[dtype],
    )


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("counter_dtype", [np.int64, np.int32])
@pytest.mark.parametrize(
    "attrs", [{}, {"beta1": 0.5, "beta2": 0.9, "epsilon": 1e-3}], ids=["default", "custom"]
)
def test_adam(attrs, counter_dtype, shape, dtype):
    param, m1, grad = (data(shape, dtype, seed=i) for i in range(3))
    m2 = data(shape, dtype, 0.0, 1.0, seed=3)  # second moments are never negative
    lr = np.array([-0.01], np.float32)
    counter = np.array([4], counter_dtype)
    check_device("Adam", [param, m1, m2, grad, lr, counter], outputs=3, **attrs, **TOL[dtype])


def test_adam_refuses_a_float_counter():
    x = data((3,), np.float32)
    with pytest.raises(OperatorError):
        run_device("Adam", [x, x, x, x, np.array([0.1], np.float32), np.array([1.0])], outputs=3)


# Batched kernels (one launch for up to MULTI tensors): more tensors than one launch takes,
# empty ones, and sizes on either side of a block's chunk of 1024.
BATCH_SHAPES = [(0,), (1,), (1023,), (1024,), (1025,), (5000,), (3, 5, 7)] * 6
assert len(BATCH_SHAPES) > MULTI


def check_batch(got, calls, cpu_kernel, tol, **attrs):
    assert len(got) == len(calls)
    for k, (call, outs) in enumerate(zip(calls, got)):
        want = cpu_kernel(*call, **attrs)
        assert len(outs) == len(want)
        for w, g in zip(want, outs):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(to_host(g), w, err_msg=f"tensor {k}", **tol)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("nesterov", [0, 1])
def test_batched_momentum_sgd_update(nesterov, dtype):
    calls = []
    for k, shape in enumerate(BATCH_SHAPES):
        grad, moment, param = (data(shape, dtype, seed=3 * k + i) for i in range(3))
        lr = np.array([0.1 + 0.01 * k], np.float32)  # each op its own rate
        calls.append((grad, moment, lr, param))
    got = momentum_sgd_update_batched_cuda(
        [tuple(to_gpu(a) for a in call) for call in calls], momentum=0.9, nesterov=nesterov
    )
    check_batch(got, calls, momentum_sgd_update_cpu, TOL[dtype], momentum=0.9, nesterov=nesterov)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("pairs", [1, 2, 4, 5])  # 5: over the batched kernel's 4, one by one
def test_batched_weighted_sum(pairs, dtype):
    calls = []
    for k, shape in enumerate(BATCH_SHAPES):
        call = []
        for i in range(pairs):
            weight = np.array([0.5 - 0.3 * i + 0.01 * k], np.float32)
            call += [data(shape, dtype, seed=pairs * k + i), weight.reshape(() if i % 2 else (1,))]
        calls.append(tuple(call))
    got = weighted_sum_batched_cuda([tuple(to_gpu(a) for a in call) for call in calls])
    check_batch(got, calls, weighted_sum_cpu, TOL[dtype])


def test_batched_kernels_take_mixed_dtypes_and_refuse_mismatched_shapes():
    x32, x64 = data((9,), np.float32), data((9,), np.float64, seed=1)
    w = np.array([0.5], np.float32)
    calls = [(x32, w, x32, w), (x64, w, x64, w)]
    got = weighted_sum_batched_cuda([tuple(to_gpu(a) for a in call) for call in calls])
    check_batch(got, calls, weighted_sum_cpu, TOL[np.float32])
    bad = [(x32, w, x32, w), (x32, w, data((8,), np.float32), w)]
    with pytest.raises(ShapeError, match="WeightedSum"):
        weighted_sum_batched_cuda([tuple(to_gpu(a) for a in call) for call in bad])
    lr = np.array([0.1], np.float32)
    bad = [(x32, x32, lr, x32), (x32, data((8,), np.float32), lr, x32)]
    with pytest.raises(ShapeError, match="MomentumSGDUpdate"):
        momentum_sgd_update_batched_cuda(
            [tuple(to_gpu(a) for a in call) for call in bad], momentum=0.9, nesterov=0
        )
