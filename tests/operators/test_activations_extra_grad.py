"""Gradients of Celu, Swish, HardSwish, Mish, Softsign, ThresholdedRelu and Shrink."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op


def away_from(x, kinks, gap=0.05):
    """x moved at least `gap` away from each kink, where the derivative jumps."""
    for k in kinks:
        x = np.where(np.abs(x - k) < gap, x + 2 * gap, x)
    return x.astype(np.float32)


# case -> (op, attrs, kinks)
CASES = {
    "Celu": ("Celu", {}, []),
    "Celu-0.5": ("Celu", {"alpha": 0.5}, []),
    "Swish": ("Swish", {}, []),
    "Swish-2": ("Swish", {"alpha": 2.0}, []),
    "HardSwish": ("HardSwish", {}, [-3, 3]),
    "Mish": ("Mish", {}, []),
    "Softsign": ("Softsign", {}, [0]),
    "ThresholdedRelu": ("ThresholdedRelu", {}, [1]),
    "ThresholdedRelu-neg": ("ThresholdedRelu", {"alpha": -0.5}, [-0.5]),
    "Shrink": ("Shrink", {}, [-0.5, 0.5]),
    "Shrink-soft": ("Shrink", {"bias": 1.0, "lambd": 1.5}, [-1.5, 1.5]),
}
GRADIENT_OPS = {
    "Celu": "CeluGradient", "Swish": "SwishGradient", "HardSwish": "HardSwishGradient",
    "Mish": "MishGradient", "Softsign": "SoftsignGradient",
    "ThresholdedRelu": "ThresholdedReluGradient", "Shrink": "ShrinkGradient",
}  # fmt: skip


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient(case, shape):
    op, attrs, kinks = CASES[case]
    x = away_from(rand(*shape, low=-5, high=5), kinks)
    check_gradient(op, [x], eps=1e-4, **attrs)


@pytest.mark.parametrize("op", sorted(GRADIENT_OPS))
def test_maker_emits(op):
    attrs = {"alpha": 0.7} if op in ("Celu", "Swish", "ThresholdedRelu") else {}
    (grad_op,) = GRADIENTS[op](op_def(op, ["x"], ["y"], **attrs), ["dy"], ["dx"])
    assert grad_op.type == GRADIENT_OPS[op]
    assert list(grad_op.input) == ["x", "dy"]
    if attrs:
        assert [(a.name, round(a.f, 6)) for a in grad_op.arg] == [("alpha", 0.7)]


def test_gradient_at_extremes_is_finite():
    x = np.array([-1e4, -50, 50, 1e4], np.float32)
    for op in ["Celu", "Swish", "Mish", "HardSwish", "Softsign"]:
        (dx,) = run_op(f"{op}Gradient", [x, np.ones(4, np.float32)])
        assert dx.dtype == np.float32 and np.all(np.isfinite(dx)), op
        np.testing.assert_allclose(dx[-2:], [1, 1] if op != "Softsign" else [0, 0], atol=1e-3)
