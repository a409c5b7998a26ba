"""Gradients of LpPool and MaxUnpool.

    LpPool(X) -> Y
        backward: LpPoolGradient(X, dY) -> dX
    MaxUnpool(X, I, output_shape) -> output
        backward: MaxUnpoolGradient(doutput, X, I, output_shape) -> dX

With Y = (sum_j |x_j|^p)^(1/p) over a window, dY/dx_j = sign(x_j) |x_j|^(p-1) / Y^(p-1), so
dX = sign(X) |X|^(p-1) * col2im(dY / Y^(p-1)): the window factor is spread over each window
as AveragePool's 1 / count is, and the pixel factor applied once. A window whose norm is 0
passes nothing (the norm has a kink there; 0 is a subgradient). The norms are recomputed
from X, in float32 for 16-bit inputs.

MaxUnpool only moves X's elements: dX[k] = doutput at the position X[k] was written to.
Where I repeats a position the forward keeps one write (NumPy's, the last in row-major
order; ONNX leaves it unspecified): the gradient finds that one with the same assignment, and
the overwritten elements get 0. I and output_shape are integers and get no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.netdef.net import op_def
from netbrew.operators.conv import check_grad_shape
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.lp_pool import lp_norms, unpool_positions
from netbrew.operators.pool import WINDOW_ATTRS, WINDOW_DEFAULTS, pool_window
from netbrew.operators.schema import REQUIRED, gradient, kernel, schema
from netbrew.operators.window_grad import col2im

schema(
    "LpPoolGradient",
    inputs=["X", "dY"],
    outputs=["dX"],
    attrs={**WINDOW_ATTRS, "p": 2},
    dtypes="float",
    onnx=False,
    doc="dX[n, c, i] = sign(X) |X|^(p-1) * sum of dY[n, c, o] / Y[n, c, o]^(p-1) over the "
    "windows o covering pixel i (Y the LpPool output; 0 where Y is 0); X (N, C, D1..Dn), dY "
    f"(N, C, O1..On) -> dX like X; attributes as LpPool: {WINDOW_DEFAULTS}, p=2",
)
schema(
    "MaxUnpoolGradient",
    inputs=["doutput", "X", "I", "output_shape?"],
    outputs=["dX"],
    attrs={"kernel_shape": REQUIRED, "pads": None, "strides": None},
    dtypes={0: "float", 2: "int", 3: "int"},
    onnx=False,
    doc="dX[k] = doutput at the flat position MaxUnpool wrote X[k] to (0 for an element that "
    "a repeated index overwrote); X read for its shape; attributes as MaxUnpool: "
    "kernel_shape required, defaults pads=0, strides=1",
)


@gradient("LpPool")
def lp_pool_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("LpPoolGradient", [op.input[0], g_out[0]], [g_in[0]], **copy_attrs(op))]


@gradient("MaxUnpool")
def max_unpool_grad(op, g_out, g_in):
    if not g_in[0]:
        return []
    return [op_def("MaxUnpoolGradient", [g_out[0], *op.input], [g_in[0]], **copy_attrs(op))]


@kernel("LpPoolGradient")
def lp_pool_gradient_cpu(
    x: np.ndarray,
    dy: np.ndarray,
    *,
    ceil_mode: int = 0,
    kernel_shape: Sequence[int],
    p: int = 2,
    **attrs,
) -> tuple[np.ndarray]:
    """`attrs`: auto_pad, dilations, pads, strides, as LpPool's."""
    win = pool_window(x, kernel_shape, attrs, ceil_mode)
    check_grad_shape(dy, (*x.shape[:2], *win.out), "LpPool's output Y")
    y = lp_norms(x, win, p, "LpPoolGradient")
    work = y.dtype
    g = dy.astype(work, copy=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(y > 0, g / (y if p == 2 else y ** (p - 1)), 0).astype(work)
    n = len(win.kernel)
    share = share.reshape(*dy.shape[:2], *(1,) * n, *win.out)
    cols = np.broadcast_to(share, (*dy.shape[:2], *win.kernel, *win.out))  # no copy
    spread = col2im(cols, win, x.shape[2:])
    xf = x.astype(work, copy=False)
    pixel = xf if p == 2 else np.sign(xf) * np.abs(xf) ** (p - 1)
    return ((spread * pixel).astype(x.dtype, copy=False),)


@kernel("MaxUnpoolGradient")
def max_unpool_gradient_cpu(
    dy: np.ndarray,
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | None = None,
    *,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> tuple[np.ndarray]:
    op = "MaxUnpoolGradient"
    positions, shape = unpool_positions(x, indices, output_shape, kernel_shape, pads, strides, op)
    check_grad_shape(dy, shape, "MaxUnpool's output", slot="doutput")
    order = np.arange(positions.size)
    # The forward's own assignment, of each element's number: which write survived.
    writer = np.full(dy.size, -1, np.int64)
    writer[positions] = order
    dx = np.where(writer[positions] == order, dy.reshape(-1)[positions], 0)
    return (dx.astype(dy.dtype, copy=False).reshape(x.shape),)
