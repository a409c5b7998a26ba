"""Optional values (ONNX optional(T)): an empty optional is None, a full one its element.

Optional, OptionalHasElement and OptionalGetElement. The gradients of Optional and
OptionalGetElement (the gradient passes through) are in optional_grad.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.operators.schema import kernel, no_gradient, schema

TYPE_PREFIX = b"onnx.TypeProto:"

schema(
    "Optional",
    inputs=["input?"],
    outputs=["output"],
    attrs={"type": None},
    doc="output = input (an optional holding it), or an empty optional (None) of `type` "
    "when input is omitted; `type` is an ONNX TypeProto, needed only without input",
)


def _type_proto(value: Any) -> bytes | None:
    """The serialized TypeProto of a `type` argument (bytes or str, alone or in a list)."""
    if isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise ValueError(f"Optional: 'type' must hold one TypeProto, got {len(value)}")
        value = value[0]
    if isinstance(value, str):
        value = value.encode("utf-8", "surrogateescape")
    if not isinstance(value, bytes) or not value.startswith(TYPE_PREFIX):
        raise ValueError(
            f"Optional: 'type' must be an ONNX TypeProto (bytes starting with {TYPE_PREFIX!r}), "
            f"got {value!r:.60}"
        )
    return value[len(TYPE_PREFIX) :]


@kernel("Optional")
def optional_cpu(x=None, *, type):
    if type is not None:
        _type_proto(type)
    elif x is None:
        raise ValueError("Optional: with no input, the 'type' attribute must give the element type")
    return (x,)


schema(
    "OptionalHasElement",
    inputs=["input?"],
    outputs=["output"],
    doc="output = input is given and is not an empty optional (bool scalar); tensors and "
    "sequences count as full",
)


@kernel("OptionalHasElement")
def optional_has_element_cpu(x=None):

    return (np.array(x is not None),)


schema(
    "OptionalGetElement",
    inputs=["input"],
    outputs=["output"],
    doc="output = the element of optional input (a tensor or sequence passes through); "
    "an empty optional is an error",
)


@kernel("OptionalGetElement")
def optional_get_element_cpu(x):
    if x is None:
        raise ValueError("OptionalGetElement: input 'input' is an empty optional")
    return (x,)


no_gradient("OptionalHasElement", "its output is a bool")
