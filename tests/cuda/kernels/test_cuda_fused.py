"""CUDA FusedElementwise: its steps run with the step ops' CUDA kernels, against the CPU."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.operators import KERNELS
from netbrew.testing import check_device, rand

# name -> (ops, slots, params, input shapes); inputs are in0, in1, ... in slot order
CHAINS = {
    "relu": (["Relu"], [0], [], [(3, 4, 5)]),
    "relu_relu": (["Relu", "Relu"], [0, -1], [], [(2, 257)]),
    "add_relu_mul_tanh": (
        ["Add", "Relu", "Mul", "Tanh"],
        [0, 1, -1, -1, 2, -1],
        [],
        [(3, 4, 5), (4, 1), (5,)],
    ),
    "sigmoid_sub_leaky_clip": (
        ["Sigmoid", "Sub", "LeakyRelu", "Clip"],
        [0, -1, 1, -1, -1, 2, 3],
        [0.2],
        [(3, 4, 5), (1,), (1,), (1,)],
    ),
    "abs_hardsigmoid_clip_max_only": (
        ["Abs", "HardSigmoid", "Clip"],
        [0, -1, -1, -2, 1],
        [float("nan"), 0.25],
        [(2, 7), (1,)],
    ),
    "sum_max_min": (["Sum", "Max", "Min"], [0, 1, -1, 2, 3, -1], [], [(3, 5), (5,), (1,), (1,)]),
}


def _needs(ops):
    missing = sorted({op for op in ops if (op, "cuda") not in KERNELS})
    if missing:
        pytest.skip(f"no CUDA kernel yet for step op(s) {missing}")


@pytest.mark.parametrize("name", list(CHAINS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_chain_matches_the_cpu(name, dtype):
    ops, slots, params, shapes = CHAINS[name]
    _needs(ops)
    inputs = [rand(*s, seed=k, low=-2, high=2).astype(dtype) for k, s in enumerate(shapes)]
    tol = 2e-3 if dtype == np.float16 else 1e-5
    attrs = {"ops": ops, "slots": slots} | ({"params": params} if params else {})
    check_device("FusedElementwise", inputs, atol=tol, rtol=tol, **attrs)


def test_a_step_without_a_cuda_kernel_is_an_error_naming_it(monkeypatch):
    monkeypatch.delitem(KERNELS._items, ("Relu", "cuda"))
    ws = Workspace()
    ws.feed_blob("x", rand(3, 4), device="cuda:0")
    op = op_def("FusedElementwise", ["x"], ["y"], device="cuda:0", ops=["Relu"], slots=[0])
    with pytest.raises(OperatorError, match=r"step 0 \(Relu\): Relu has no CUDA kernel"):
        ws.run_operator_once(op)
