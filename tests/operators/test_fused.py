"""ConvRelu, GemmRelu and FCRelu against their base op followed by a NumPy Relu."""

import numpy as np
import onnx
import pytest

from netbrew.converters.onnx.to_onnx import CONVERTERS
from netbrew.operators import GRADIENTS
from netbrew.testing import check_op, rand, run_op

CASES = [
    (
        "ConvRelu",
        "Conv",
        [rand(2, 3, 6, 6, seed=1), rand(4, 3, 3, 3, seed=2), rand(4, seed=3)],
        {"pads": [1, 1, 1, 1]},
    ),
    (
        "ConvRelu",
        "Conv",
        [rand(1, 4, 5, 5, seed=1), rand(4, 2, 3, 3, seed=2)],
        {"group": 2, "strides": [2, 2]},
    ),
    (
        "GemmRelu",
        "Gemm",
        [rand(3, 5, seed=1), rand(4, 5, seed=2), rand(4, seed=3)],
        {"transB": 1, "alpha": 0.5},
    ),
    ("GemmRelu", "Gemm", [rand(3, 5, seed=1), rand(5, 4, seed=2)], {}),
    ("FCRelu", "FC", [rand(2, 3, 2, 2, seed=1), rand(5, 12, seed=2), rand(5, seed=3)], {}),
]


@pytest.mark.parametrize("fused, base, inputs, attrs", CASES)
def test_fused_equals_base_then_relu(fused, base, inputs, attrs):
    (before,) = run_op(base, inputs, **attrs)
    assert (before < 0).any()  # the Relu has something to do
    check_op(fused, inputs, reference=lambda *a: (np.maximum(before, 0),), **attrs)


@pytest.mark.parametrize("fused", ["ConvRelu", "GemmRelu", "FCRelu"])
def test_fused_ops_have_a_gradient_and_export_split(fused):
    assert callable(GRADIENTS[fused])  # checked by central differences in test_fused_grad.py
    from netbrew.netdef import op_def

    op = op_def(fused, ["x", "w", "b"], ["y"])
    nodes = CONVERTERS[fused](op).nodes
    assert nodes[-1].op_type == "Relu" and nodes[-1].output == ["y"]
    assert nodes[-2].op_type in ("Conv", "Gemm") and nodes[-2].output == nodes[-1].input
    for node in nodes:
        onnx.checker.check_node(node)
