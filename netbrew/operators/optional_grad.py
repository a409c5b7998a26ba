"""Gradients of Optional and OptionalGetElement.

A full optional is represented by its element itself (optional.py), so both ops pass the
value through and their gradients pass the gradient through unchanged:

    Optional(x) -> opt                backward: Identity(d opt) -> dx
    OptionalGetElement(opt) -> y      backward: Identity(dy) -> d opt

The gradient of an optional holding a sequence is a sequence gradient (a list), which
Identity passes as it is. An empty optional (Optional with no input) has nothing to
differentiate, and OptionalGetElement refuses one in the forward.
"""

from __future__ import annotations

from netbrew.netdef.net import op_def
from netbrew.operators.schema import gradient


@gradient("Optional", inplace_safe=True)
def optional_grad(op, g_out, g_in):
    """d input = d output (reads only the gradient)."""
    if not g_in or not g_in[0]:
        return []
    return [op_def("Identity", [g_out[0]], [g_in[0]])]


@gradient("OptionalGetElement", inplace_safe=True)
def optional_get_element_grad(op, g_out, g_in):
    """d optional = d element: the optional is its element."""
    if not g_in[0]:
        return []
    return [op_def("Identity", [g_out[0]], [g_in[0]])]
