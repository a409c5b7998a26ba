"""brew array helpers: concat, flatten, reshape, transpose, sum."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netbrew.brew.arg_scope import helper
from netbrew.brew.model_helper import ModelHelper
from netbrew.netdef.net import BlobReference


@helper
def concat(
    model: ModelHelper, blobs_in: Sequence[str], blob_out: str, *, axis: int = 1
) -> BlobReference:
    """Joins blobs along `axis` (default 1, channels). Emits: Concat."""
    return model.net.Concat(list(blobs_in), blob_out, axis=axis)


@helper
def flatten(model: ModelHelper, blob_in: str, blob_out: str, *, axis: int = 1) -> BlobReference:
    """[d0, ..., dn] -> [d0 * ... * d(axis-1), rest]. Emits: Flatten."""
    return model.net.Flatten(blob_in, blob_out, axis=axis)


@helper
def reshape(
    model: ModelHelper, blob_in: str, blob_out: str, *, shape: Sequence[int]
) -> BlobReference:
    """Reshape to `shape` (0 copies a dim, -1 infers one). Emits: Reshape, with the shape as
    a constant int64 blob `{blob_out}_shape`."""
    target = model.add_constant(f"{blob_out}_shape", np.asarray(shape, dtype=np.int64))
    return model.net.Reshape([blob_in, target], blob_out)


@helper
def transpose(
    model: ModelHelper, blob_in: str, blob_out: str, *, axes: Sequence[int] | None = None
) -> BlobReference:
    """Permutes axes (reverses them when `axes` is None). Emits: Transpose."""
    return model.net.Transpose(blob_in, blob_out, perm=list(axes) if axes is not None else None)


@helper
def sum(model: ModelHelper, blobs_in: Sequence[str], blob_out: str) -> BlobReference:  # noqa: A001
    """Elementwise sum of any number of blobs. Emits: Sum."""
    return model.net.Sum(list(blobs_in), blob_out)
