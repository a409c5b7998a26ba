"""Gradients of MatMulBias and SkipLayerNormalization, by the gradient makers of the ops
each stands for, so a net differentiated after its inference passes gets the unfused net's
gradient ops and numbers:

    MatMulBias(A, B, C) -> Y        T = MatMul(A, B) again (Add's gradient reduces like
                                    it); for Gelu, Z = T + C again and GeluGradient(Z, dY);
                                    then Add's gradient to T and C, MatMul's to A and B
    SkipLayerNormalization(X, Skip, Scale, B) -> Y
                                    S = X + Skip again, LayerNormalization's gradient on S
                                    to dS, Scale and B, then Add's to X and Skip
"""

from __future__ import annotations

from netbrew.netdef.net import op_def
from netbrew.operators import fused_transformer  # noqa: F401  (the forward ops)
from netbrew.operators.grad_util import copy_attrs, tmp
from netbrew.operators.schema import GRADIENTS, gradient


@gradient("MatMulBias")
def matmul_bias_grad(op, g_out, g_in):
    """Gelu's gradient (if fused), then Add's, then MatMul's."""
    a, b, c = op.input
    activation = copy_attrs(op).get("activation", "")
    product = tmp(g_out[0], "product")
    ops = [op_def("MatMul", [a, b], [product])]
    dy = g_out[0]
    if activation == "Gelu":
        before = tmp(g_out[0], "before_gelu")
        ops.append(op_def("Add", [product, c], [before]))
        gelu = op_def("Gelu", [before], [op.output[0]], approximate="none")
        dy = tmp(g_out[0], "gelu_in")
        ops += GRADIENTS["Gelu"](gelu, [g_out[0]], [dy])
    d_product = tmp(g_out[0], "d_product") if g_in[0] or g_in[1] else None
    add = op_def("Add", [product, c], [op.output[0]])
    ops += GRADIENTS["Add"](add, [dy], [d_product, g_in[2]])
    if d_product:
        ops += GRADIENTS["MatMul"](op_def("MatMul", [a, b], [product]), [d_product], g_in[:2])
    return ops


@gradient("SkipLayerNormalization")
def skip_layer_normalization_grad(op, g_out, g_in):
    """LayerNormalization's gradient on the recomputed sum, then Add's."""
    x, skip, *params = op.input
    total = tmp(g_out[0], "skip_sum")
    ops = [op_def("Add", [x, skip], [total])]
    d_total = tmp(g_out[0], "d_skip_sum") if g_in[0] or g_in[1] else None
    norm = op_def("LayerNormalization", [total, *params], [op.output[0]], **copy_attrs(op))
    ops += GRADIENTS["LayerNormalization"](norm, g_out, [d_total, *g_in[2:]])
    if d_total:
        ops += GRADIENTS["Add"](op_def("Add", [x, skip], [total]), [d_total], g_in[:2])
    return ops
