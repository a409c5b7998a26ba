"""netbrew.nn.functional against NumPy references and torch.nn.functional."""

import numpy as np
import pytest

from netbrew.nn import functional as F

RNG = np.random.default_rng(1)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((4, 5)).astype(np.float32)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)


def test_elementwise_and_matmul_follow_numpy():
    np.testing.assert_allclose(F.matmul(A, B), A @ B, rtol=1e-6)
    np.testing.assert_array_equal(F.add(A, 2), A + 2)
    np.testing.assert_array_equal(F.sub(1.5, A), 1.5 - A)
    np.testing.assert_array_equal(F.mul(A, A), A * A)
    np.testing.assert_allclose(F.div(A, 3.0), A / 3.0, rtol=1e-7)
    assert F.add(A, 2).dtype == np.float32  # Python scalars take the array's dtype
    ints = np.array([1, 2, 7], np.int64)
    np.testing.assert_array_equal(F.div(ints, 2), ints / 2)  # true division, as torch.div
    assert F.add(ints, 0.5).dtype == np.float64
    np.testing.assert_allclose(F.exp(A), np.exp(A), rtol=1e-6)
    np.testing.assert_allclose(F.log(np.abs(A)), np.log(np.abs(A)), rtol=1e-6)
    np.testing.assert_allclose(F.sqrt(np.abs(A)), np.sqrt(np.abs(A)), rtol=1e-6)
    np.testing.assert_array_equal(F.abs(A), np.abs(A))
    np.testing.assert_array_equal(F.relu(A), np.maximum(A, 0))


def test_shapes_follow_pytorch_semantics():
    np.testing.assert_array_equal(F.reshape(X, (6, -1)), X.reshape(6, -1))
    np.testing.assert_array_equal(F.transpose(X, 1, 3), X.swapaxes(1, 3))
    np.testing.assert_array_equal(F.permute(X, (3, 0, 2, 1)), X.transpose(3, 0, 2, 1))
    np.testing.assert_array_equal(F.flatten(X), X.reshape(-1))  # start_dim=0 by default
    np.testing.assert_array_equal(F.flatten(X, 1, 2), X.reshape(2, 12, 5))
    np.testing.assert_array_equal(F.cat([A, A * 2], dim=1), np.concatenate([A, A * 2], 1))
    with pytest.raises(ValueError, match="start_dim cannot come after end_dim"):
        F.flatten(X, 2, 1)


def test_softmaxes_and_losses_match_pytorch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    t = torch.from_numpy(X)
    np.testing.assert_allclose(F.softmax(X, dim=1), tf.softmax(t, dim=1).numpy(), atol=1e-6)
    np.testing.assert_allclose(F.log_softmax(X, 2), tf.log_softmax(t, 2).numpy(), atol=1e-5)
    assert F.softmax(X, 1, dtype=np.float64).dtype == np.float64
    logits = RNG.standard_normal((6, 4)).astype(np.float32)
    target = np.array([0, 3, 1, 1, -100, 2], np.int64)
    weight = np.array([1.0, 2.0, 0.5, 1.5], np.float32)
    for kwargs in ({}, {"reduction": "sum"}, {"reduction": "none"}, {"weight": weight}):
        tkw = {
            k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()
        }
        expected = tf.cross_entropy(torch.from_numpy(logits), torch.from_numpy(target), **tkw)
        got = F.cross_entropy(logits, target, **kwargs)
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="class indices"):
        F.cross_entropy(logits, np.zeros((6, 4), np.float32))


def test_normalization_functions_match_pytorch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    t = torch.from_numpy(X)
    w = RNG.standard_normal(5).astype(np.float32)
    np.testing.assert_allclose(
        F.layer_norm(X, (5,), w), tf.layer_norm(t, (5,), torch.from_numpy(w)).numpy(), atol=1e-5
    )
    np.testing.assert_allclose(F.layer_norm(X, (4, 5)), tf.layer_norm(t, (4, 5)).numpy(), atol=1e-5)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
    tmean, tvar = torch.zeros(3), torch.ones(3)
    y = F.batch_norm(X, mean, var, training=True, momentum=0.25)
    ty = tf.batch_norm(t, tmean, tvar, training=True, momentum=0.25)
    np.testing.assert_allclose(y, ty.numpy(), atol=1e-5)
    np.testing.assert_allclose(mean, tmean.numpy(), atol=1e-6)  # updated in place
    np.testing.assert_allclose(var, tvar.numpy(), rtol=1e-5)
    with pytest.raises(ValueError, match="trailing dims"):
        F.layer_norm(X, (4,))


def test_pooling_and_dropout_reference():
    y = F.max_pool2d(X, 2)
    np.testing.assert_array_equal(y, X[..., :4].reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)))
    np.testing.assert_allclose(F.adaptive_avg_pool2d(X, 1), X.mean(axis=(2, 3), keepdims=True))
    assert F.dropout(X, 0.5, training=False) is X
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(X, 1.5)
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(X, 2, padding=2)
    with pytest.raises(TypeError, match="indices must be integers"):
        F.embedding(A, B)


def test_linear_any_rank():
    w = RNG.standard_normal((3, 5)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(F.linear(X, w, b), X @ w.T + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F.linear(X[0, 0, 0], w), w @ X[0, 0, 0], rtol=1e-5)
    np.testing.assert_allclose(F.linear(X[0, 0], w, b), X[0, 0] @ w.T + b, rtol=1e-5)
