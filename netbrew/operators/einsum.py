"""Einsum (np.einsum semantics, ellipsis included) with its gradient, and Det.

    Einsum(Inputs...) -> Output
        backward: EinsumGradient(dY, Inputs...) -> dInputs...

The gradient of input i contracts dY with the other inputs onto input i's labels; labels only
input i has are broadcast back, repeated labels (diagonals) scattered onto the diagonal, and
dims that broadcasting expanded summed back. Det's gradient (the transposed adjugate) is in
einsum_grad.py.
"""

from __future__ import annotations

import re
import string

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.schema import REQUIRED, gradient, kernel, no_gradient, schema
from netbrew.operators.sum_reduce_like import sum_to_shape

schema(
    "Einsum",
    inputs=["Inputs*"],
    outputs=["Output"],
    attrs={"equation": REQUIRED},
    doc="Output = einsum(equation, Inputs...), as np.einsum: 'term1,term2->out' sums the "
    "products over the labels missing from out; without '->' out is the labels appearing "
    "once, sorted; '...' broadcasts; equation required; Output in the inputs' dtype",
)
schema(
    "EinsumGradient",
    inputs=["dY", "Inputs*"],
    outputs=["dInputs*"],
    attrs={"equation": REQUIRED},
    onnx=False,
    output_mask=True,
    doc="dInputs[i] = einsum of dY with the other Inputs onto input i's labels (broadcast over "
    "labels only input i has, placed on the diagonal for repeated labels, summed over "
    "broadcast dims); shapes of Inputs, dY's dtype; equation required (the forward's)",
)
schema(
    "Det",
    dtypes="float",
    doc="Y = det(X) of each square matrix: X (*, M, M) -> Y (*), a scalar for 2-D X",
)
no_gradient("EinsumGradient", "gradient op; second order is not supported")

_TERM = re.compile(r"^[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def _parse(equation: str, shapes: list[tuple[int, ...]]) -> tuple[list[str], str]:
    """Input terms and output term with every '...' spelled out as explicit labels.

    Raises SchemaError for a malformed equation and ShapeError when a term does not fit its
    input's rank.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise SchemaError(
            f"Einsum: equation {equation!r} has {len(terms)} input terms, but the op has "
            f"{len(shapes)} inputs"
        )
    for term in terms + ([rhs] if arrow else []):
        if not _TERM.match(term):
            raise SchemaError(
                f"Einsum: term {term!r} of equation {equation!r} is not letters with at most "
                "one '...'"
            )
    ranks = []
    for i, (term, shape) in enumerate(zip(terms, shapes)):
        named = len(term.replace("...", ""))
        rank = len(shape) - named
        if rank < 0 or (rank > 0 and "..." not in term):
            raise ShapeError(
                f"Einsum: input {i} has {len(shape)} dims {list(shape)}, but its term {term!r} "
                f"names {named}{' plus an ellipsis' if '...' in term else ''}"
            )
        ranks.append(rank)
    used = set(eq)
    fresh = [c for c in string.ascii_letters if c not in used][: max(ranks, default=0)]
    ell = "".join(fresh)
    spelled = [t.replace("...", ell[len(ell) - r :]) for t, r in zip(terms, ranks)]
    if arrow:
        out = rhs.replace("...", ell)
    else:
        named = "".join(t.replace("...", "") for t in terms)
        out = ell + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    for c in out:
        if not any(c in t for t in spelled):
            raise SchemaError(f"Einsum: output label {c!r} of {equation!r} is in no input term")
    return spelled, out


def _compute_dtype(arrays: list[np.ndarray]) -> np.dtype:
    dtype = np.result_type(*arrays) if arrays else np.dtype(np.float32)
    small_float = dtype.kind == "f" or dtype.name == "bfloat16"
    return np.dtype(np.float32) if small_float and dtype.itemsize < 4 else dtype


def _is_number(dtype: np.dtype) -> bool:
    """Ints and floats (bfloat16 included); Einsum takes no bool, complex or strings."""
    return dtype.kind in "iuf" or dtype.name == "bfloat16"


def _einsum(spec: str, *operands: np.ndarray) -> np.ndarray:
    return np.einsum(spec, *operands, optimize=len(operands) > 2)


@kernel("Einsum")
def einsum_cpu(*inputs: np.ndarray, equation: str) -> tuple[np.ndarray]:
    terms, out = _parse(equation, [x.shape for x in inputs])
    dtypes = {x.dtype for x in inputs}
    if len(dtypes) > 1:
        raise SchemaError(f"Einsum: inputs have dtypes {sorted(map(str, dtypes))}, expected one")
    if not _is_number(inputs[0].dtype):
        raise SchemaError(f"Einsum: inputs have dtype {inputs[0].dtype}, expected ints or floats")
    work = _compute_dtype(list(inputs))
    ops = [x.astype(work, copy=False) for x in inputs]
    try:
        y = _einsum(f"{','.join(terms)}->{out}", *ops)
    except ValueError as e:
        shapes = ", ".join(str(list(x.shape)) for x in inputs)
        raise ShapeError(f"Einsum: {equation!r} does not fit inputs {shapes}: {e}") from None
    return (np.asarray(y).astype(inputs[0].dtype, copy=False),)


def _input_gradient(i: int, dy: np.ndarray, xs: list[np.ndarray], terms: list[str], out: str):
    """d(sum(dY * einsum(xs))) / d xs[i]."""
    term = terms[i]
    labels = "".join(dict.fromkeys(term))  # unique, in order of first appearance
    others = [(t, x) for k, (t, x) in enumerate(zip(terms, xs)) if k != i]
    avail = set(out).union(*(set(t) for t, _ in others))
    kept = "".join(c for c in labels if c in avail)
    spec = ",".join([out] + [t for t, _ in others]) + "->" + kept
    part = _einsum(spec, dy, *(x for _, x in others))
    own = {c: n for c, n in zip(term, xs[i].shape)}  # sizes of labels only input i has
    sizes = {c: part.shape[kept.index(c)] if c in kept else own[c] for c in labels}
    g = part.reshape([sizes[c] if c in kept else 1 for c in labels])  # kept is labels' order
    g = np.broadcast_to(g, [sizes[c] for c in labels])
    if len(labels) < len(term):  # repeated labels: the gradient lives on the diagonal
        full = np.zeros([sizes[c] for c in term], g.dtype)
        strides = [sum(full.strides[j] for j, c in enumerate(term) if c == u) for u in labels]
        as_strided(full, g.shape, strides)[...] = g
        g = full
    return sum_to_shape(np.ascontiguousarray(g), xs[i].shape)


@kernel("EinsumGradient")
def einsum_gradient_cpu(
    dy: np.ndarray, *inputs: np.ndarray, equation: str, output_mask: tuple[bool, ...]
) -> tuple[np.ndarray | None, ...]:
    terms, out = _parse(equation, [x.shape for x in inputs])
    work = _compute_dtype([dy, *inputs])
    g = dy.astype(work, copy=False)
    xs = [x.astype(work, copy=False) for x in inputs]
    grads = []
    for i, wanted in enumerate(output_mask):
        if wanted and i < len(xs):
            grads.append(_input_gradient(i, g, xs, terms, out).astype(dy.dtype, copy=False))
        else:
            grads.append(None)
    return tuple(grads)


@gradient("Einsum")
def einsum_grad(op, g_out, g_in):
    from netbrew.netdef.args import args_dict

    if not any(g_in):
        return []
    equation = args_dict(op.arg)["equation"]
    outs = [g or "" for g in g_in]
    return [op_def("EinsumGradient", [g_out[0], *op.input], outs, equation=equation)]


@kernel("Det")
def det_cpu(x: np.ndarray) -> tuple[np.ndarray]:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"Det: input X has shape {list(x.shape)}, expected (*, M, M) (square matrices in "
            "the last two dims)"
        )
    work = np.float64 if x.dtype == np.float64 else np.float32
    return (np.asarray(np.linalg.det(x.astype(work, copy=False))).astype(x.dtype),)
