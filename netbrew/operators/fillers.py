"""Caffe2's fillers: ConstantFill, GivenTensor*Fill, Gaussian, Uniform, Xavier and MSRA fills.

Every filler takes its output shape from the `shape` argument, or from its optional input:
that input's shape plus `extra_shape`, or, with input_as_shape=1, the input's values
(a 1-D integer tensor) plus `extra_shape`. The shape is checked against
`limits.MAX_ELEMENTS` before anything is allocated. Kernels receive those three
arguments as `**shape_args` and hand them to `_out_shape`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.tensor import DT, dtype_of
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import kernel, no_gradient, schema

_SHAPE_ATTRS = {"shape": None, "extra_shape": None, "input_as_shape": 0}
_SHAPE_DOC = "shape from `shape`, or input's shape (its values if input_as_shape) + extra_shape"

schema(
    "ConstantFill",
    inputs=["input?"],
    outputs=["output"],
    attrs={**_SHAPE_ATTRS, "value": None, "dtype": None},
    onnx=False,
    doc=f"output = full(shape, value, dtype); {_SHAPE_DOC}; defaults value=0.0, dtype=FLOAT "
    "(INT64 when dtype is unset and value is an int, as Caffe2), input_as_shape=0",
)

# op type -> numpy dtype of its values
_GIVEN_FILLS: dict[str, Any] = {
    "GivenTensorFill": np.float32,
    "GivenTensorDoubleFill": np.float64,
    "GivenTensorIntFill": np.int32,
    "GivenTensorInt64Fill": np.int64,
    "GivenTensorBoolFill": np.bool_,
    "GivenTensorInt16Fill": np.int16,
    "GivenTensorStringFill": object,
}
for _op, _dtype in _GIVEN_FILLS.items():
    _extra = {"dtype": None} if _op == "GivenTensorFill" else {}
    schema(
        _op,
        inputs=["input?"],
        outputs=["output"],
        attrs={**_SHAPE_ATTRS, "values": None, **_extra},
        onnx=False,
        doc=f"output = reshape(values, shape) as {np.dtype(_dtype).name}; {_SHAPE_DOC}; "
        "len(values) must equal prod(shape)"
        + ("; dtype (TensorProto.DataType) overrides float32" if _extra else ""),
    )

schema(
    "GaussianFill",
    inputs=["input?"],
    outputs=["output"],
    attrs={**_SHAPE_ATTRS, "mean": 0.0, "std": 1.0},
    onnx=False,
    rng=True,
    doc=f"output ~ Normal(mean, std) float32; {_SHAPE_DOC}; defaults mean=0.0, std=1.0",
)
schema(
    "UniformFill",
    inputs=["input?", "min?", "max?"],
    outputs=["output"],
    attrs={**_SHAPE_ATTRS, "min": 0.0, "max": 1.0},
    onnx=False,
    rng=True,
    doc=f"output ~ Uniform[min, max) float32; {_SHAPE_DOC}; min, max from inputs 1, 2 when "
    "given (min > max then empties dim 0); defaults min=0.0, max=1.0",
)
schema(
    "XavierFill",
    inputs=["input?"],
    outputs=["output"],
    attrs=_SHAPE_ATTRS,
    onnx=False,
    rng=True,
    doc=f"output ~ Uniform[-s, s) float32, s = sqrt(3 / fan_in), fan_in = numel / shape[0]; "
    f"{_SHAPE_DOC}",
)
schema(
    "MSRAFill",
    inputs=["input?"],
    outputs=["output"],
    attrs=_SHAPE_ATTRS,
    onnx=False,
    rng=True,
    doc=f"output ~ Normal(0, sqrt(2 / fan_out)) float32, fan_out = numel / shape[1]; {_SHAPE_DOC}",
)


for _op in ("ConstantFill", *_GIVEN_FILLS, "GaussianFill", "UniformFill", "XavierFill", "MSRAFill"):
    no_gradient(_op, "a filler makes constants or random draws; inputs give only shapes or bounds")


def _out_shape(
    op: str,
    x: np.ndarray | None,
    shape: Sequence[int] | None,
    extra_shape: Sequence[int] | None,
    input_as_shape: int,
) -> tuple[int, ...]:
    """The output shape from the arguments or the input, checked against the size limit."""
    if shape is not None and not isinstance(shape, (list, tuple, np.ndarray)):
        raise SchemaError(f"{op}: argument shape is {shape!r}, expected a list of ints")
    if x is None:
        if input_as_shape:
            raise SchemaError(f"{op}: input_as_shape=1 needs an input holding the shape")
        if extra_shape:
            raise SchemaError(f"{op}: extra_shape needs an input; put all dims in shape")
        dims = list(shape if shape is not None else ())
    else:
        if shape is not None and len(shape):
            raise SchemaError(
                f"{op}: got both the shape argument and an input; the input sets the shape, "
                "drop one of them"
            )
        if input_as_shape:
            if x.ndim != 1 or x.dtype.kind not in "iu":
                raise ShapeError(
                    f"{op}: with input_as_shape=1, input 'input' must be a 1-D integer tensor, "
                    f"got {x.dtype}{list(x.shape)}"
                )
            dims = x.tolist()
        else:
            dims = list(x.shape)
        dims += list(extra_shape or ())
    return check_numel(dims, f"{op} shape")


@kernel("ConstantFill")
def constant_fill_cpu(
    x: np.ndarray | None = None, *, value: Any, dtype: int | None, **shape_args: Any
) -> tuple[np.ndarray]:
    """A tensor of the given shape filled with `value`."""
    dims = _out_shape("ConstantFill", x, **shape_args)
    if dtype is None:
        dtype = DT.INT64 if isinstance(value, int) and not isinstance(value, bool) else DT.FLOAT
    np_dtype = dtype_of(dtype)
    if np_dtype.kind == "O":
        return (np.full(dims, "" if value is None else value, dtype=object),)
    return (np.full(dims, 0 if value is None else value, dtype=np_dtype),)


def _given_fill_kernel(op: str, default_dtype: Any) -> Callable[..., tuple[np.ndarray]]:
    """Builds the kernel of one GivenTensor*Fill op."""

    def given_fill_cpu(
        x: np.ndarray | None = None,
        *,
        values: Sequence[Any] | np.ndarray | None,
        dtype: int | None = None,
        **shape_args: Any,
    ) -> tuple[np.ndarray]:
        dims = _out_shape(op, x, **shape_args)
        np_dtype = default_dtype if dtype is None else dtype_of(dtype)
        if op == "GivenTensorStringFill":  # bytes, as Caffe2's std::string values
            items = [v.encode() if isinstance(v, str) else bytes(v) for v in values or ()]
            flat = np.empty(len(items), object)
            flat[:] = items
        else:
            flat = np.asarray([] if values is None else values, dtype=np_dtype).reshape(-1)
        if flat.size != math.prod(dims):
            raise ShapeError(
                f"{op}: argument values has {flat.size} entries, but shape {list(dims)} "
                f"needs {math.prod(dims):,}"
            )
        return (flat.reshape(dims),)

    given_fill_cpu.__name__ = given_fill_cpu.__qualname__ = f"{op}_cpu"
    return given_fill_cpu


for _op, _dtype in _GIVEN_FILLS.items():
    kernel(_op)(_given_fill_kernel(_op, _dtype))


def _uniform(
    rng: np.random.Generator, dims: tuple[int, ...], low: float, high: float
) -> np.ndarray:
    return rng.random(dims, dtype=np.float32) * (high - low) + low


@kernel("GaussianFill")
def gaussian_fill_cpu(
    x: np.ndarray | None = None,
    *,
    mean: float,
    std: float,
    rng: np.random.Generator,
    **shape_args: Any,
) -> tuple[np.ndarray]:
    """Normal(mean, std) samples, float32."""
    if std < 0:
        raise ValueError(f"GaussianFill: argument std is {std}, expected >= 0")
    dims = _out_shape("GaussianFill", x, **shape_args)
    return (rng.standard_normal(dims, dtype=np.float32) * std + mean,)


@kernel("UniformFill")
def uniform_fill_cpu(
    x: np.ndarray | None = None,
    min_input: np.ndarray | None = None,
    max_input: np.ndarray | None = None,
    *,
    rng: np.random.Generator,
    **args: Any,
) -> tuple[np.ndarray]:
    """Uniform[min, max) samples, float32; bounds from arguments or from inputs 1 and 2.

    `args` holds the `min` and `max` arguments (names that would shadow builtins) and the
    shape arguments.
    """
    low, high = args.pop("min"), args.pop("max")
    dims = _out_shape("UniformFill", x, **args)
    if (min_input is None) != (max_input is None):
        raise SchemaError("UniformFill: give both the min and max inputs, or neither")
    if min_input is not None:
        for name, v in (("min", min_input), ("max", max_input)):
            if np.size(v) != 1:
                raise ShapeError(
                    f"UniformFill: input {name} has shape {list(np.shape(v))}, expected 1 value"
                )
        low, high = float(np.ravel(min_input)[0]), float(np.ravel(max_input)[0])
        if low > high and dims:  # Caffe2 gives an empty tensor here instead of failing
            dims = (0, *dims[1:])
    elif low > high:
        raise ValueError(f"UniformFill: argument min={low} is greater than max={high}")
    return (_uniform(rng, dims, low, high),)


@kernel("XavierFill")
def xavier_fill_cpu(
    x: np.ndarray | None = None, *, rng: np.random.Generator, **shape_args: Any
) -> tuple[np.ndarray]:
    """Uniform in ±sqrt(3 / fan_in), fan_in = numel / shape[0]."""
    dims = _out_shape("XavierFill", x, **shape_args)
    if len(dims) < 1:
        raise ShapeError("XavierFill: shape [] has no dim 0 to compute fan_in from")
    numel = math.prod(dims)
    scale = math.sqrt(3 / (numel // dims[0])) if numel else 0.0
    return (_uniform(rng, dims, -scale, scale),)


@kernel("MSRAFill")
def msra_fill_cpu(
    x: np.ndarray | None = None, *, rng: np.random.Generator, **shape_args: Any
) -> tuple[np.ndarray]:
    """Normal(0, sqrt(2 / fan_out)), fan_out = numel / shape[1]."""
    dims = _out_shape("MSRAFill", x, **shape_args)
    if len(dims) < 2:
        raise ShapeError(f"MSRAFill: shape {list(dims)} has no dim 1 to compute fan_out from")
    numel = math.prod(dims)
    std = math.sqrt(2 / (numel // dims[1])) if numel else 0.0
    return (rng.standard_normal(dims, dtype=np.float32) * std,)
