"""LabelEncoder, ArrayFeatureExtractor and Binarizer (ai.onnx.ml) against NumPy/dicts."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, run_op


def obj(*values):
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def encode(x, keys, values, default, dtype):
    table = {}
    for k, v in zip(keys, values):
        table["nan" if isinstance(k, float) and np.isnan(k) else k] = v
    flat = [
        table.get("nan" if isinstance(k, float) and np.isnan(k) else k, default)
        for k in x.reshape(-1).tolist()
    ]
    out = np.empty(x.size, dtype=dtype)
    out[:] = flat
    return (out.reshape(x.shape),)


@pytest.mark.parametrize(
    "x, attrs, keys, values, default, dtype",
    [
        (
            obj("a", "b", "d", "c", "g"),
            {"keys_strings": ["a", "b", "c"], "values_int64s": [0, 1, 2], "default_int64": 42},
            ["a", "b", "c"],
            [0, 1, 2],
            42,
            np.int64,
        ),
        (
            obj("a", "b", "d"),
            {"keys_strings": ["a", "b", "c"], "values_int64s": [0, 1, 2]},
            ["a", "b", "c"],
            [0, 1, 2],
            -1,
            np.int64,
        ),
        (
            np.array([[1, 5], [7, 3]], np.int64),
            {"keys_int64s": [1, 3, 1], "values_strings": ["x", "y", "z"]},
            [1, 3, 1],
            ["x", "y", "z"],
            "_Unused",
            object,
        ),
        (
            np.array([0.5, np.nan, 2.0, -0.0], np.float32),
            {
                "keys_floats": [np.nan, 0.0, 0.5],
                "values_floats": [9.0, 8.0, 7.0],
                "default_float": 1.5,
            },
            [np.nan, 0.0, 0.5],
            [9.0, 8.0, 7.0],
            1.5,
            np.float32,
        ),
        (
            obj("a", "zz"),
            {
                "keys_tensor": obj("a", "b"),
                "values_tensor": np.array([3, 4], np.int16),
                "default_tensor": np.array([42], np.int16),
            },
            ["a", "b"],
            [3, 4],
            42,
            np.int16,
        ),
        (
            obj("b", "q"),
            {"keys_strings": ["a", "b"], "values_tensor": np.array([1.5, 2.5])},
            ["a", "b"],
            [1.5, 2.5],
            -0.0,
            np.float64,
        ),
        (
            np.array([2, 9], np.int32),
            {"keys_tensor": np.array([2, 3], np.int32), "values_tensor": obj("two", "three")},
            [2, 3],
            ["two", "three"],
            "_Unused",
            object,
        ),
    ],
)
def test_label_encoder(x, attrs, keys, values, default, dtype):
    check_op("LabelEncoder", [x], lambda x: encode(x, keys, values, default, dtype), **attrs)


def test_label_encoder_errors():
    with pytest.raises(OperatorError, match="exactly one keys_"):
        run_op("LabelEncoder", [obj("a")], values_int64s=[1])
    with pytest.raises(OperatorError, match="2 keys but 1 values"):
        run_op("LabelEncoder", [obj("a")], keys_strings=["a", "b"], values_int64s=[1])
    with pytest.raises(OperatorError, match="string tensor"):
        run_op("LabelEncoder", [np.array([1])], keys_strings=["a"], values_int64s=[1])


@pytest.mark.parametrize(
    "x, idx",
    [
        (np.arange(12, dtype=np.float32).reshape(3, 4), np.array([0, 1])),
        (np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.array([[3, 0, 3]])),
        (np.arange(5, dtype=np.float64), np.array([4, 2])),
        (obj("a", "b", "c"), np.array([2], np.int64)),
    ],
)
def test_array_feature_extractor(x, idx):
    def reference(x, i):
        z = x[..., i.reshape(-1)]
        return (z.reshape(1, -1) if x.ndim == 1 else z,)

    check_op("ArrayFeatureExtractor", [x, idx], reference)


def test_array_feature_extractor_errors():
    with pytest.raises(OperatorError, match="index 4, out of range"):
        run_op("ArrayFeatureExtractor", [np.ones((2, 4)), np.array([4])])
    with pytest.raises(OperatorError, match="expected int64"):
        run_op("ArrayFeatureExtractor", [np.ones((2, 4)), np.array([1.0])])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("threshold", [0.0, 1.5])
def test_binarizer(dtype, threshold):
    x = (np.arange(-6, 6).reshape(3, 4) * 0.75).astype(dtype)
    check_op("Binarizer", [x], lambda x: ((x > threshold).astype(dtype),), threshold=threshold)
