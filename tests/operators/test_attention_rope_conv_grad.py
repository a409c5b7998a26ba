"""Gradients of RotaryEmbedding and CausalConvWithState against central differences."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_gradient, rand, run_op

POSITIONS = np.array([[0, 3, 1, 3, 9], [4, 4, 5, 6, 7]])  # rows 3 and 4 are read twice


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("dim", [0, 4])  # the whole head, or half of it
@pytest.mark.parametrize("wrt", [[0], [1, 2], [0, 1, 2]])
def test_rotary_embedding_gradient_position_ids(interleaved, dim, wrt):
    half = (dim or 8) // 2
    x, cos, sin = rand(2, 3, 5, 8), rand(10, half, seed=1), rand(10, half, seed=2)
    check_gradient(
        "RotaryEmbedding", [x, cos, sin, POSITIONS], wrt=wrt, interleaved=interleaved,
        rotary_embedding_dim=dim,
    )  # fmt: skip


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("dim", [0, 6])
def test_rotary_embedding_gradient_3d_per_token_caches(interleaved, dim):
    half = (dim or 8) // 2
    x = rand(2, 5, 3 * 8)
    cos, sin = rand(2, 5, half, seed=1), rand(2, 5, half, seed=2)
    check_gradient(
        "RotaryEmbedding", [x, cos, sin], interleaved=interleaved, rotary_embedding_dim=dim,
        num_heads=3,
    )  # fmt: skip


def test_rotary_embedding_gradient_of_x_is_the_inverse_rotation():
    """With cos = cos(a), sin = sin(a), dX = R(-a) dY, so rotating dX forward gives dY back."""
    angles = rand(2, 5, 4, low=-3, high=3)
    cos, sin, dy = np.cos(angles), np.sin(angles), rand(2, 3, 5, 8, seed=3)
    (dx,) = run_op("RotaryEmbeddingGradient", [rand(2, 3, 5, 8), cos, sin, dy], outputs=["dx"])
    (back,) = run_op("RotaryEmbedding", [dx, cos, sin])
    np.testing.assert_allclose(back, dy, rtol=1e-5, atol=1e-6)


def test_rotary_embedding_gradient_skips_position_ids():
    op = op_def("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"])
    (grad_op,) = GRADIENTS["RotaryEmbedding"](op, ["dy"], ["dx", None, "dsin", "dpos"])
    assert grad_op.type == "RotaryEmbeddingGradient"
    assert list(grad_op.input) == ["x", "cos", "sin", "dy", "pos"]
    assert list(grad_op.output) == ["dx", "", "dsin"]


def test_rotary_embedding_gradient_checks_dy():
    x, cos, sin = rand(2, 3, 5, 8), rand(2, 5, 4, seed=1), rand(2, 5, 4, seed=2)
    with pytest.raises(OperatorError, match="'dY' has shape"):
        run_op("RotaryEmbeddingGradient", [x, cos, sin, rand(2, 3, 5, 6)], outputs=["dx"])


# silu runs in float32 inside a float64 forward: wider steps keep rounding out of the check
SILU = {"eps": 1e-2, "atol": 1e-3}


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("with_past", [False, True])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
def test_causal_conv_with_state_gradient(k, with_bias, with_past, activation):
    x, w = rand(2, 3, 5), rand(3, 1, k, seed=1)
    bias = rand(3, seed=2) if with_bias else None
    past = rand(2, 3, k - 1, seed=3) if with_past else None
    tolerances = {} if activation == "none" else SILU
    check_gradient(
        "CausalConvWithState", [x, w, bias, past], outputs=2, activation=activation,
        **tolerances,
    )  # fmt: skip


@pytest.mark.parametrize("length", [2, 6])  # shorter and longer than the k - 1 = 3 state
@pytest.mark.parametrize("grad_outputs", [[0], [1]])
def test_causal_conv_with_state_gradient_per_output(length, grad_outputs):
    x, w, past = rand(2, 3, length), rand(3, 1, 4, seed=1), rand(2, 3, 3, seed=3)
    check_gradient(
        "CausalConvWithState", [x, w, rand(3, seed=2), past], outputs=2,
        grad_outputs=grad_outputs, activation="silu", **SILU,
    )  # fmt: skip


def test_causal_conv_with_state_gradient_op_skips_unnamed_outputs():
    x, w, dy = rand(2, 3, 5), rand(3, 1, 3, seed=1), rand(2, 3, 5, seed=2)
    (db,) = run_op(
        "CausalConvWithStateGradient", [x, w, rand(3), None, dy, None], outputs=["", "", "db"]
    )
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2)), rtol=1e-6)


def test_causal_conv_with_state_gradient_checks_output_gradients():
    x, w = rand(2, 3, 5), rand(3, 1, 3, seed=1)
    with pytest.raises(OperatorError, match="'dpresent_state' has shape"):
        run_op("CausalConvWithStateGradient", [x, w, None, None, None, rand(2, 3, 3)], outputs=1)
