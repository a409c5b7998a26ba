"""ConvRelu, GemmRelu and FCRelu: a Conv, Gemm or FC with its Relu fused in.

Made by netbrew.netdef.passes.fuse_activation for inference: the Relu runs in place on the
base op's fresh output, so the net holds one blob and one op fewer. Each takes exactly its
base op's inputs and attributes. Their gradients are Relu's then the base op's
(netbrew.operators.fused_grad), so a net differentiated after its inference passes gets the
unfused net's gradients; ONNX export splits them back into the base op and a Relu (see
netbrew.converters.onnx.fused_to_onnx).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.operators import conv, matmul  # noqa: F401  (declare the base ops first)
from netbrew.operators.schema import get_kernel, get_schema, kernel, schema
from netbrew.operators.zeros import relu

FUSED_RELU: dict[str, str] = {"Conv": "ConvRelu", "Gemm": "GemmRelu", "FC": "FCRelu"}
"""Base op type -> its fused-with-Relu op type."""


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
        outputs=list(spec.outputs),
        attrs=dict(spec.attrs),
        dtypes=dict(spec.dtypes),
        onnx=False,
        infer=spec.infer,
        doc=f"Y = max({base}(inputs), 0): {base} then Relu in place; inputs, shapes and "
        f"attributes as {base}",
    )
    base_kernel = get_kernel(base)

    def fused_cpu(*arrays: np.ndarray, **attrs: Any) -> tuple[np.ndarray]:
        (out,) = base_kernel(*arrays, **attrs)
        return (relu_in_place(out),)

    fused_cpu.__name__ = fused_cpu.__qualname__ = f"{fused.lower()}_cpu"
    fused_cpu.__doc__ = f"{base} kernel, then Relu on its output in place."
    kernel(fused)(fused_cpu)


for _base, _fused in FUSED_RELU.items():
    _declare(_base, _fused)
