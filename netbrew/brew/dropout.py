"""brew.dropout."""

from __future__ import annotations

import numpy as np

from netbrew.brew.arg_scope import helper
from netbrew.brew.model_helper import ModelHelper
from netbrew.netdef.net import BlobReference


@helper
def dropout(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    *,
    ratio: float = 0.5,
    is_test: bool = False,
    seed: int | None = None,
) -> BlobReference:
    """Zeroes each element with probability `ratio` and scales the rest by 1 / (1 - ratio).

    In training it also writes the mask `{blob_out}_mask`, which the gradient needs;
    under is_test it is the identity.
    Emits: Dropout (with constant ratio and training_mode blobs in training).
    """
    if is_test:
        return model.net.Dropout([blob_in], blob_out)
    ratio_blob = model.add_constant(f"{blob_out}_ratio", np.float32(ratio))
    mode_blob = model.add_constant(f"{blob_out}_training", np.bool_(True))
    out, _ = model.net.Dropout(
        [blob_in, ratio_blob, mode_blob], [blob_out, f"{blob_out}_mask"], seed=seed
    )
    return out
