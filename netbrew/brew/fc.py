"""brew.fc: fully connected layer."""

from __future__ import annotations

from typing import Any

from netbrew.brew.arg_scope import helper
from netbrew.brew.initializers import ConstantInit, Initializer, XavierInit, resolve
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference


@helper
def fc(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    dim_in: int,
    dim_out: int,
    *,
    weight_init: Initializer | None = None,
    bias_init: Initializer | None = None,
    axis: int = 1,
    **op_args: Any,
) -> BlobReference:
    """Y = flatten(X, axis) · Wᵀ + b with W `{blob_out}_w` [dim_out, dim_in], b `{blob_out}_b`.

    Emits: FC. Parameters: `{blob_out}_w` (WEIGHT, Xavier), `{blob_out}_b` (BIAS, zeros).
    """
    w = model.create_param(
        f"{blob_out}_w", [dim_out, dim_in], resolve(weight_init, XavierInit()), Tags.WEIGHT
    )
    b = model.create_param(
        f"{blob_out}_b", [dim_out], resolve(bias_init, ConstantInit()), Tags.BIAS
    )
    return model.net.FC([blob_in, w, b], blob_out, axis=axis, **op_args)
