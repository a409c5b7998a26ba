"""ai.onnx.ml ops: LabelEncoder, ArrayFeatureExtractor and Binarizer (TreeEnsemble is in
onnx_ml_trees.py).

LabelEncoder follows ai.onnx.ml opset 4: one of keys_floats / keys_int64s / keys_strings /
keys_tensor, one of values_floats / values_int64s / values_strings / values_tensor, and the
default_* matching the values (default_tensor for values_tensor: -1, -0.0 or "_Unused" by
the values' kind when unset). Float keys equal to NaN match NaN inputs; a repeated key maps
to its last value.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema
from netbrew.operators.strings import as_text

_KINDS = ("floats", "int64s", "strings", "tensor")
_LIST_DTYPES = {"floats": np.float32, "int64s": np.int64, "strings": object}

schema(
    "LabelEncoder",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        **{f"keys_{k}": None for k in _KINDS},
        **{f"values_{k}": None for k in _KINDS},
        "default_float": -0.0,
        "default_int64": -1,
        "default_string": "_Unused",
        "default_tensor": None,
    },
    doc="Y[i] = values[j] where keys[j] == X[i] (last match), else the default; keys_* and "
    "values_* are parallel lists or 1-D tensors; Y has X's shape and the values' dtype",
)


def _pick(attrs: dict, prefix: str) -> tuple[str, np.ndarray]:
    given = [k for k in _KINDS if attrs[f"{prefix}_{k}"] is not None]
    if len(given) != 1:
        found = ", ".join(f"{prefix}_{k}" for k in given) or "none"
        raise SchemaError(f"LabelEncoder: set exactly one {prefix}_* attribute, got {found}")
    kind, value = given[0], attrs[f"{prefix}_{given[0]}"]
    if kind == "tensor":
        array = np.asarray(value).reshape(-1)
        if array.dtype.kind in "OSU":
            array = as_text(array, f"{prefix}_tensor", "LabelEncoder")
        return kind, array
    if kind == "strings":
        return kind, as_text(
            np.array(list(value), dtype=object), f"{prefix}_strings", "LabelEncoder"
        )
    return kind, np.asarray(list(value), dtype=_LIST_DTYPES[kind])


def _default(kind: str, values: np.ndarray, attrs: dict):
    if kind == "tensor":
        given = attrs["default_tensor"]
        if given is None:
            return (
                "_Unused" if values.dtype == object else (-1 if values.dtype.kind in "iu" else -0.0)
            )
        given = np.asarray(given).reshape(-1)
        if given.size != 1:
            raise SchemaError(f"LabelEncoder: default_tensor has {given.size} elements, expected 1")
        return (
            as_text(given, "default_tensor", "LabelEncoder")[0]
            if given.dtype.kind in "OSU"
            else given[0]
        )
    return attrs[
        {"floats": "default_float", "int64s": "default_int64", "strings": "default_string"}[kind]
    ]


@kernel("LabelEncoder")
def label_encoder_cpu(x, **attrs):
    _, keys = _pick(attrs, "keys")
    kind, values = _pick(attrs, "values")
    if keys.size != values.size:
        raise SchemaError(f"LabelEncoder: {keys.size} keys but {values.size} values")
    default = _default(kind, values, attrs)
    if keys.dtype == object:
        text = as_text(x, "X", "LabelEncoder")
        table = dict(zip(keys.tolist(), range(keys.size)))  # later keys overwrite earlier ones
        pos = np.array([table.get(s, -1) for s in text.reshape(-1).tolist()], np.int64)
        pos = pos.reshape(x.shape)
    else:
        if x.dtype.kind not in "iuf":
            raise SchemaError(f"LabelEncoder: input 'X' has dtype {x.dtype}, keys are {keys.dtype}")
        common = np.result_type(keys.dtype, x.dtype)
        k, xs = keys.astype(common), x.astype(common)
        order = np.argsort(k, kind="stable")
        ks = k[order]
        at = np.searchsorted(ks, xs, side="right") - 1  # last of equal keys
        found = at >= 0
        near = ks[at.clip(0)] if ks.size else np.zeros_like(xs)
        hit = found & (
            (near == xs) | (np.isnan(near) & np.isnan(xs) if common.kind == "f" else False)
        )
        pos = np.where(hit, order[at.clip(0)] if ks.size else 0, -1)
    out = np.empty(x.shape, dtype=values.dtype)
    out[...] = default
    mask = pos >= 0
    out[mask] = values[pos[mask]]
    return (out,)


schema(
    "ArrayFeatureExtractor",
    inputs=["X", "Y"],
    outputs=["Z"],
    doc="Z = X[..., Y] (Y: int64 indices into X's last axis, flattened); Z is X.shape[:-1] + "
    "[Y.size], or [1, Y.size] for 1-D X (as onnxruntime)",
)


@kernel("ArrayFeatureExtractor")
def array_feature_extractor_cpu(x, indices):
    if indices.dtype.kind not in "iu":
        raise SchemaError(
            f"ArrayFeatureExtractor: input 'Y' has dtype {indices.dtype}, expected int64"
        )
    if x.ndim == 0:
        raise ShapeError("ArrayFeatureExtractor: input 'X' is a scalar, expected rank >= 1")
    idx = indices.reshape(-1).astype(np.int64)
    size = x.shape[-1]
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        raise ShapeError(
            f"ArrayFeatureExtractor: input 'Y' holds index {idx[bad][0]}, out of range "
            f"[0, {size}) for X's last axis (X shape {list(x.shape)})"
        )
    z = x[..., idx]
    return (z.reshape(1, -1) if x.ndim == 1 else z,)


schema(
    "Binarizer",
    inputs=["X"],
    outputs=["Y"],
    attrs={"threshold": 0.0},
    dtypes="numeric",
    doc="Y = 1 if X > threshold else 0 (default threshold 0.0), elementwise in X's dtype",
)


@kernel("Binarizer")
def binarizer_cpu(x, threshold):
    return ((x > threshold).astype(x.dtype),)


no_gradient("LabelEncoder", "a lookup table from keys to values has no gradient")
no_gradient("ArrayFeatureExtractor", "ai.onnx.ml feature selection; no gradient is defined")
no_gradient("Binarizer", "a step function: its gradient is zero almost everywhere")
