"""Random ops: shapes, dtypes, seeding and distribution statistics (values are NumPy's)."""

import numpy as np
import pytest

from netbrew.errors import OperatorError, SchemaError
from netbrew.testing import run_op


def draw(op, inputs=(), **attrs):
    return run_op(op, list(inputs), **attrs)[0]


@pytest.mark.parametrize(
    "op, inputs, attrs, shape, dtype",
    [
        ("RandomUniform", [], {"shape": [3, 4]}, (3, 4), np.float32),
        ("RandomUniform", [], {"shape": [5], "dtype": "DOUBLE"}, (5,), np.float64),
        ("RandomNormal", [], {"shape": [2, 3, 2]}, (2, 3, 2), np.float32),
        ("RandomNormal", [], {"shape": [4], "dtype": "FLOAT16"}, (4,), np.float16),
        ("RandomUniformLike", [np.zeros((2, 5))], {}, (2, 5), np.float64),
        ("RandomUniformLike", [np.zeros((3,), np.int64)], {"dtype": 1}, (3,), np.float32),
        ("RandomNormalLike", [np.zeros((4, 1), np.float32)], {}, (4, 1), np.float32),
        ("RandomNormalLike", [np.zeros((0, 2), np.int32)], {"dtype": "DOUBLE"}, (0, 2), np.float64),
        ("Bernoulli", [np.full((3, 3), 0.5, np.float32)], {}, (3, 3), np.float32),
        ("Bernoulli", [np.full(6, 0.5)], {"dtype": "INT64"}, (6,), np.int64),
        ("Bernoulli", [np.full(2, 0.5)], {"dtype": "BOOL"}, (2,), np.bool_),
        ("Multinomial", [np.zeros((2, 5), np.float32)], {"sample_size": 7}, (2, 7), np.int32),
        ("Multinomial", [np.zeros((1, 3))], {"dtype": "INT64"}, (1, 1), np.int64),
    ],
)
def test_shapes_and_dtypes(op, inputs, attrs, shape, dtype):
    out = draw(op, inputs, **attrs)
    assert out.shape == shape and out.dtype == dtype
    again = draw(op, inputs, seed=3.0, **attrs)
    np.testing.assert_array_equal(again, draw(op, inputs, seed=3.0, **attrs))


def test_uniform_and_normal_statistics():
    u = draw("RandomUniform", shape=[20000], low=-2.0, high=6.0, seed=1.0, dtype="DOUBLE")
    assert u.min() >= -2.0 and u.max() < 6.0
    assert abs(u.mean() - 2.0) < 0.1 and abs(u.std() - 8 / np.sqrt(12)) < 0.05
    n = draw("RandomNormalLike", [np.zeros((100, 200))], mean=3.0, scale=0.5, seed=2.0)
    assert abs(n.mean() - 3.0) < 0.02 and abs(n.std() - 0.5) < 0.02
    assert not np.array_equal(n, draw("RandomNormalLike", [np.zeros((100, 200))], seed=4.0))


def test_bernoulli_values():
    p = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    np.testing.assert_array_equal(draw("Bernoulli", [p]), p)
    big = draw("Bernoulli", [np.full(20000, 0.25)], seed=0.0)
    assert set(np.unique(big)) <= {0.0, 1.0} and abs(big.mean() - 0.25) < 0.02


def test_multinomial_values():
    logits = np.log(np.array([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0]], np.float32) + 1e-30)
    out = draw("Multinomial", [logits], sample_size=30000, seed=5.0)
    freq = np.stack([np.bincount(row, minlength=3) / row.size for row in out])
    np.testing.assert_allclose(freq[0], [0.1, 0.2, 0.7], atol=0.015)
    np.testing.assert_array_equal(freq[1], [1.0, 0.0, 0.0])
    wide = draw("Multinomial", [np.array([[-1e9, 5.0, -1e9, -1e9]] * 3)], sample_size=4)
    np.testing.assert_array_equal(wide, np.ones((3, 4), np.int32))


@pytest.mark.parametrize(
    "op, inputs, attrs, error, match",
    [
        ("Bernoulli", [np.array([0.5, 1.5])], {}, OperatorError, r"holds 1.5.*\[0, 1\]"),
        ("Bernoulli", [np.array([0.5])], {"dtype": 999}, SchemaError, "dtype=999"),
        ("RandomUniformLike", [np.zeros(2, np.int64)], {}, OperatorError, "set dtype"),
        ("RandomNormal", [], {"shape": [2], "dtype": "INT32"}, OperatorError, "FLOAT"),
        ("RandomNormal", [], {}, SchemaError, "shape"),
        ("RandomUniform", [], {"shape": [2**20, 2**20]}, OperatorError, "over the limit"),
        ("Multinomial", [np.zeros(3)], {}, OperatorError, r"\[batch_size, class_size\]"),
        ("Multinomial", [np.zeros((1, 3))], {"dtype": 1}, OperatorError, "INT32"),
    ],
)
def test_errors(op, inputs, attrs, error, match):
    with pytest.raises(error, match=match):
        run_op(op, inputs, **attrs)
