"""ConvRelu, GemmRelu and FCRelu: a Conv, Gemm or FC with its Relu fused in; FusedConv: a
Conv with a residual Add and a Relu or Clip fused in.

ConvRelu, GemmRelu and FCRelu are made by netbrew.netdef.passes.fuse_activation for
inference: the Relu runs in place on the base op's fresh output, so the net holds one blob
and one op fewer. Each takes exactly its base op's inputs and attributes. FusedConv is made
by netbrew.netdef.passes.fuse_conv_epilogue: Y = activation(Conv(X, W, B) + Z), as in
ResNet's blocks (Conv, Add, Relu) and MobileNetV2's (Conv, Clip(0, 6); Conv, Add). With
the JIT on its bias, residual and activation are one numba pass over the conv's output
(conv_numba.epilogue); with it off, the Conv, Add, Relu and Clip kernels run in turn, the
unfused numbers exactly. Their gradients are the unfused ops' (netbrew.operators.fused_grad),
so a net differentiated after its inference passes gets the unfused net's gradients; ONNX
export splits them back into the unfused nodes (see netbrew.converters.onnx.fused_to_onnx).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew import jit
from netbrew.errors import SchemaError
from netbrew.operators import (  # noqa: F401  (the base ops first)
    arithmetic,
    conv,
    matmul,
    normalization,
    normalization_jit,
)
from netbrew.operators.conv_last import channels_last, columns, pointwise, use_pointwise
from netbrew.operators.conv_last import finish as finish_last
from netbrew.operators.conv_numba import direct_correlate, epilogue, use_direct
from netbrew.operators.schema import get_kernel, get_schema, kernel, schema
from netbrew.operators.window import make_window
from netbrew.operators.zeros import relu

FUSED_RELU: dict[str, str] = {
    "Conv": "ConvRelu",
    "Gemm": "GemmRelu",
    "FC": "FCRelu",
    "BatchNormalization": "BatchNormalizationRelu",
}
"""Base op type -> its fused-with-Relu op type (a BatchNormalization only in inference,
with one output: see netbrew.netdef.passes.fuse_activation)."""


def relu_in_place(out: np.ndarray) -> np.ndarray:
    """Relu over a kernel's fresh output, in place (a copy for a read-only one)."""
    if isinstance(out, np.ndarray) and out.flags.writeable:
        return relu(out, out=out)
    return relu(out)


def _declare(base: str, fused: str) -> None:
    spec = get_schema(base)
    inputs = [name if i < spec.min_inputs else f"{name}?" for i, name in enumerate(spec.inputs)]
    schema(
        fused,
        inputs=inputs,
        outputs=[n if i < spec.min_outputs else f"{n}?" for i, n in enumerate(spec.outputs)],
        attrs=dict(spec.attrs),
        dtypes=dict(spec.dtypes),
        onnx=False,
        infer=spec.infer,
        doc=f"Y = max({base}(inputs), 0): {base} then Relu in place; inputs, shapes and "
        f"attributes as {base}",
    )
    base_kernel = get_kernel(base)

    def fused_cpu(*arrays: np.ndarray, **attrs: Any) -> tuple[np.ndarray, ...]:
        out = base_kernel(*arrays, **attrs)
        return (relu_in_place(out[0]), *out[1:])

    fused_cpu.__name__ = fused_cpu.__qualname__ = f"{fused.lower()}_cpu"
    fused_cpu.__doc__ = f"{base} kernel, then Relu on its output in place."
    own = {"BatchNormalization": batch_normalization_relu_cpu, "Conv": conv_relu_cpu}
    kernel(fused)(own.get(base, fused_cpu))


def conv_relu_cpu(x: np.ndarray, w: np.ndarray, b=None, **conv_attrs: Any) -> tuple[np.ndarray]:
    """Conv with its bias and Relu in one numba pass after the GEMM (FusedConv's path with
    activation Relu) where the JIT takes X; else Conv's kernel, then Relu in place. (The
    bias added by Conv's kernel, then Relu, were two passes over the output: in-process
    A/B, squeezenet and inception_v1 0.97x the time.)"""
    clamp = _clamp("Relu", None, None, x.dtype)
    if clamp is not None:
        y = _fused(x, w, b, None, clamp, conv_attrs, False, keep_layout=True)
        if y is not None:
            return (y,)
    (y,) = conv.conv_cpu(x, w, b, **conv_attrs)
    return (relu_in_place(y),)


def batch_normalization_relu_cpu(
    x: np.ndarray, scale, b, input_mean, input_var, *, epsilon, momentum, training_mode
) -> tuple[np.ndarray, ...]:
    """BatchNormalization with its Relu in the same numba pass (Y = max(X * a + t, 0) per
    channel) where the JIT takes X; else BatchNormalization's kernel, then Relu in place.
    (DenseNet-121's dense layers, BN then Relu on their Concat.)"""
    xv = normalization_jit.channels_view(x)
    if xv is None:
        out = get_kernel("BatchNormalization")(
            x, scale, b, input_mean, input_var,
            epsilon=epsilon, momentum=momentum, training_mode=training_mode,
        )  # fmt: skip
        return (relu_in_place(out[0]), *out[1:])
    normalization.check_params(x, scale, b, input_mean, input_var)
    return normalization.batch_normalization_jit(
        x, xv, scale, b, input_mean, input_var, epsilon, momentum, training_mode, relu=True
    )


for _base, _fused in FUSED_RELU.items():
    _declare(_base, _fused)


ACTIVATIONS = ("", "Relu", "Clip")
"""FusedConv's `activation` values: none, Relu, Clip(min, max)."""

schema(
    "FusedConv",
    inputs=["X", "W", "B?", "Z?", "min?", "max?"],
    outputs=["Y"],
    attrs={**conv._ATTRS, "activation": "", "channels_last": 0},
    dtypes={0: "float", 1: "float", 2: "float", 3: "float"},
    onnx=False,
    doc="Y = activation(Conv(X, W, B) + Z): Z (the residual) optional, added as Add does; "
    "activation '' (none), 'Relu' or 'Clip' (bounds min, max: optional scalars, as Clip's); "
    "X, W, B and attributes as Conv's; Y shaped as Add(Conv(X, W, B), Z). channels_last=1 "
    "lets an ungrouped 2-D conv without Z leave Y channels-last in memory (set by the "
    "fuse_conv_epilogue pass where only depthwise convs read Y); the values are the same",
)


@kernel("FusedConv")
def fused_conv_cpu(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    z: np.ndarray | None = None,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    *,
    activation: str = "",
    channels_last: int = 0,
    **conv_attrs: Any,
) -> tuple[np.ndarray]:
    """Conv, then + Z, then Relu or Clip: one numba pass after the conv where the JIT is on,
    X is float32 or float64 and Z (if given) has the conv output's shape and dtype; else the
    unfused ops' kernels in turn."""
    if activation not in ACTIVATIONS:
        raise SchemaError(
            f"argument activation={activation!r} is not one of {', '.join(map(repr, ACTIVATIONS))}"
        )
    if activation != "Clip" and (low is not None or high is not None):
        raise SchemaError(f"inputs min and max are Clip's bounds, got activation={activation!r}")
    clamp = _clamp(activation, low, high, x.dtype)
    if clamp is not None:
        y = _fused(x, w, b, z, clamp, conv_attrs, bool(channels_last))
        if y is not None:
            return (y,)
    (y,) = conv.conv_cpu(x, w, b, **conv_attrs)
    if z is not None:
        (y,) = get_kernel("Add")(y, z)
    if activation == "Relu":
        y = relu_in_place(y)
    elif activation == "Clip":
        (y,) = get_kernel("Clip")(y, low, high)
    return (y,)


def _clamp(activation: str, low, high, dtype) -> tuple[float, float] | None:
    """(lo, hi) for the numba epilogue, or None where the unfused kernels must run (JIT off,
    a dtype other than float32/64, bounds that are not scalars of X's dtype: Clip's kernel
    then checks them and raises as Clip would)."""
    if not jit.enabled() or dtype not in jit.FLOATS:
        return None
    bounds = [-np.inf, np.inf]
    if activation == "Relu":
        bounds[0] = 0.0
    for k, bound in enumerate((low, high) if activation == "Clip" else ()):
        if bound is None:
            continue
        if bound.size != 1 or bound.dtype != dtype:
            return None
        bounds[k] = float(bound.reshape(()))
    if bounds[0] > bounds[1]:  # ONNX: every element becomes max
        bounds[0] = bounds[1]
    return bounds[0], bounds[1]


def _fused(
    x, w, b, z, clamp, attrs: dict, last: bool, keep_layout: bool = False
) -> np.ndarray | None:
    """The conv with the epilogue fused in, or None where Z does not have the conv output's
    shape and dtype (broadcasting or a mismatch the Add kernel handles or reports); `last`:
    an ungrouped 2-D conv without Z may answer channels-last (conv_last.columns);
    `keep_layout`: a conv without Z that answers channels-last (conv_hwc) is finished in
    that layout, not copied to C order first."""
    group = attrs.get("group", 1)
    conv.check_conv_operands(x, w, b, group, attrs.get("kernel_shape"), transposed=False)
    win = make_window(
        x.shape[2:], w.shape[2:], attrs.get("strides"), attrs.get("dilations"),
        attrs.get("pads"), attrs.get("auto_pad", "NOTSET"),
    )  # fmt: skip
    if z is not None and (z.shape != (x.shape[0], w.shape[0], *win.out) or z.dtype != x.dtype):
        return None
    if z is None and use_direct(x.shape[1], group, win):
        return direct_correlate(x, w, win, b, clamp)
    if use_pointwise(x, w, win, group):
        return pointwise(x, w, win, b, z, clamp, group)
    if last and z is None and group == 1 and len(win.kernel) == 2:
        return columns(x, w, win, b, clamp)
    y = conv.correlate(x, w, win, group)
    if keep_layout and z is None and y.ndim == 4 and channels_last(y):
        return finish_last(y.transpose(0, 2, 3, 1), b, None, clamp)
    return epilogue(np.ascontiguousarray(y), b, z, clamp)
