"""brew pooling: max_pool, average_pool, global_avg_pool, global_max_pool."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from netbrew.brew._util import caffe2_window
from netbrew.brew.arg_scope import helper
from netbrew.brew.model_helper import ModelHelper
from netbrew.netdef.net import BlobReference

Ints = int | Sequence[int]


@helper
def max_pool(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    *,
    kernel: Ints | None = None,
    stride: Ints | None = None,
    pad: Ints = 0,
    global_pooling: bool = False,
    **op_args: Any,
) -> BlobReference:
    """Max over each window (stride 1 unless given, as in Caffe2), or over all spatial axes
    with global_pooling=True (Caffe2's spelling of global_max_pool). Emits: MaxPool or
    GlobalMaxPool."""
    if global_pooling:
        return global_max_pool(model, blob_in, blob_out)
    window = caffe2_window(op_args, _kernel(kernel, "max_pool", blob_out), stride, pad)
    return model.net.MaxPool(blob_in, blob_out, **window, **op_args)


def _kernel(kernel: Ints | None, helper_name: str, blob_out: str) -> Ints:
    if kernel is None:
        raise TypeError(f"brew.{helper_name} {blob_out!r}: give kernel, or global_pooling=True")
    return kernel


@helper
def average_pool(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    *,
    kernel: Ints | None = None,
    stride: Ints | None = None,
    pad: Ints = 0,
    global_pooling: bool = False,
    **op_args: Any,
) -> BlobReference:
    """Mean over each window, or over all spatial axes with global_pooling=True. Emits:
    AveragePool or GlobalAveragePool."""
    if global_pooling:
        return global_avg_pool(model, blob_in, blob_out)
    window = caffe2_window(op_args, _kernel(kernel, "average_pool", blob_out), stride, pad)
    return model.net.AveragePool(blob_in, blob_out, **window, **op_args)


@helper
def global_avg_pool(model: ModelHelper, blob_in: str, blob_out: str) -> BlobReference:
    """Mean over all spatial axes, kept as size 1. Emits: GlobalAveragePool."""
    return model.net.GlobalAveragePool(blob_in, blob_out)


@helper
def global_max_pool(model: ModelHelper, blob_in: str, blob_out: str) -> BlobReference:
    """Max over all spatial axes, kept as size 1. Emits: GlobalMaxPool."""
    return model.net.GlobalMaxPool(blob_in, blob_out)
