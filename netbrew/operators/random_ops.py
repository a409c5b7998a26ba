"""Bernoulli, RandomUniform(Like), RandomNormal(Like) and Multinomial.

Each kernel draws from `rng`, a NumPy Generator the executor seeds from the op's `seed`
attribute (else from the device option, else fresh entropy). Streams are NumPy's, so the
values differ from other runtimes' for the same seed; only shapes, dtypes and the
distributions are portable. `dtype` attributes name a type as netbrew.netdef.dtypes says
(np.float64, "double", netbrew's TensorProto.DOUBLE); the NetDef stores ONNX's name, and
the kernels also read ONNX's numbers, as ONNX files hold them.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef import dtypes
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

_FLOAT_NAMES = "FLOAT, DOUBLE, FLOAT16 or BFLOAT16"


def onnx_np_dtype(code: int, op: str, allowed: str = "float") -> np.dtype:
    """The NumPy dtype of an ONNX TensorProto.DataType number, checked against `allowed`."""
    try:
        dtype = dtypes.onnx_np_dtype(code)
    except ValueError as e:
        raise SchemaError(f"{op}: dtype={e}") from None
    is_float = dtype.kind == "f" or dtype.name == "bfloat16"
    if allowed == "float" and not is_float:
        raise SchemaError(f"{op}: dtype={code} ({dtype}) is not one of {_FLOAT_NAMES}")
    if allowed == "index" and dtype not in (np.int32, np.int64):
        raise SchemaError(f"{op}: dtype={code} ({dtype}) must be INT32 (6) or INT64 (7)")
    return dtype


def _like_dtype(x: np.ndarray, dtype: int | None, op: str) -> np.dtype:
    if dtype is not None:
        return onnx_np_dtype(dtype, op)
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return x.dtype
    raise SchemaError(
        f"{op}: input has dtype {x.dtype} and no dtype attribute is set; set dtype to one of "
        f"{_FLOAT_NAMES} (the output must be a float type)"
    )


_SEED_DOC = "seed: float, unset draws fresh entropy"

schema(
    "Bernoulli",
    inputs=["input"],
    outputs=["output"],
    attrs={"dtype": None, "seed": None},
    dtypes={0: "float"},
    rng=True,
    doc="output = 1 with probability input (in [0, 1]) else 0, elementwise; dtype (any "
    f"numeric or bool) defaults to input's; {_SEED_DOC}",
)


@kernel("Bernoulli")
def bernoulli_cpu(p, dtype, seed, rng):
    out_dtype = p.dtype if dtype is None else onnx_np_dtype(dtype, "Bernoulli", allowed="any")
    probs = p.astype(np.float64)
    bad = ~((probs >= 0) & (probs <= 1))  # NaN counts as bad
    if bad.any():
        value = probs.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
        raise ValueError(
            f"Bernoulli: input 'input' holds {value}, expected probabilities in [0, 1]"
        )
    return ((rng.random(p.shape) < probs).astype(out_dtype),)


for _name, _params, _formula in (
    ("Uniform", {"low": 0.0, "high": 1.0}, "Uniform[low, high) (defaults 0.0, 1.0)"),
    ("Normal", {"mean": 0.0, "scale": 1.0}, "Normal(mean, scale) (defaults 0.0, 1.0)"),
):
    schema(
        f"Random{_name}",
        inputs=[],
        outputs=["output"],
        attrs={"shape": REQUIRED, "dtype": int(TensorProto.FLOAT), **_params, "seed": None},
        rng=True,
        doc=f"output ~ {_formula}, of the given shape; dtype FLOAT "
        f"by default, one of {_FLOAT_NAMES}; {_SEED_DOC}",
    )
    schema(
        f"Random{_name}Like",
        inputs=["input"],
        outputs=["output"],
        attrs={"dtype": None, **_params, "seed": None},
        rng=True,
        doc=f"output ~ {_formula}, shaped like input; dtype defaults "
        f"to input's, which must then be a float type; {_SEED_DOC}",
    )


def _draw(kind, shape, dtype, a, b, rng):
    if kind == "uniform":
        values = rng.uniform(a, b, size=shape)
    else:
        values = rng.normal(a, b, size=shape)
    return (values.astype(dtype),)


def _fixed_shape(shape, op):
    shape = [shape] if isinstance(shape, (int, np.integer)) else list(shape)
    return check_numel(shape, f"{op} output")


@kernel("RandomUniform")
def random_uniform_cpu(shape, dtype, low, high, seed, rng):
    out = onnx_np_dtype(dtype, "RandomUniform")
    return _draw("uniform", _fixed_shape(shape, "RandomUniform"), out, low, high, rng)


@kernel("RandomNormal")
def random_normal_cpu(shape, dtype, mean, scale, seed, rng):
    out = onnx_np_dtype(dtype, "RandomNormal")
    return _draw("normal", _fixed_shape(shape, "RandomNormal"), out, mean, scale, rng)


@kernel("RandomUniformLike")
def random_uniform_like_cpu(x, dtype, low, high, seed, rng):
    out = _like_dtype(x, dtype, "RandomUniformLike")
    return _draw("uniform", x.shape, out, low, high, rng)


@kernel("RandomNormalLike")
def random_normal_like_cpu(x, dtype, mean, scale, seed, rng):
    out = _like_dtype(x, dtype, "RandomNormalLike")
    return _draw("normal", x.shape, out, mean, scale, rng)


schema(
    "Multinomial",
    inputs=["input"],
    outputs=["output"],
    attrs={"dtype": int(TensorProto.INT32), "sample_size": 1, "seed": None},
    dtypes={0: "float"},
    rng=True,
    doc="output[b, s] = class index drawn with probability softmax(input[b])  (input: "
    "[batch, classes] unnormalized log-probabilities); output [batch, sample_size] "
    f"(default 1), dtype INT32 (6, default) or INT64 (7); {_SEED_DOC}",
)


@kernel("Multinomial")
def multinomial_cpu(logits, dtype, sample_size, seed, rng):
    out_dtype = onnx_np_dtype(dtype, "Multinomial", allowed="index")
    if logits.ndim != 2:
        raise ShapeError(
            f"Multinomial: input 'input' has shape {list(logits.shape)}, expected "
            "[batch_size, class_size]"
        )
    batch, classes = logits.shape
    if classes == 0:
        raise ShapeError("Multinomial: input 'input' has no classes (class_size is 0)")
    if sample_size < 0:
        raise SchemaError(f"Multinomial: sample_size={sample_size} must be >= 0")
    check_numel((batch, sample_size), "Multinomial output")
    z = logits.astype(np.float64)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    cdf = np.cumsum(z, axis=1)
    cdf /= cdf[:, -1:]
    # One searchsorted over all rows: row b's CDF is shifted by 2b so the rows stay sorted.
    shift = 2.0 * np.arange(batch)[:, None]
    u = rng.random((batch, sample_size)) + shift
    idx = np.searchsorted((cdf + shift).reshape(-1), u.reshape(-1), side="right")
    idx = idx.reshape(batch, sample_size) - classes * np.arange(batch)[:, None]
    return (np.clip(idx, 0, classes - 1).astype(out_dtype),)


for _op in (
    "Bernoulli",
    "RandomUniform",
    "RandomNormal",
    "RandomUniformLike",
    "RandomNormalLike",
    "Multinomial",
):
    no_gradient(_op, "random draws are not differentiable in their inputs")
