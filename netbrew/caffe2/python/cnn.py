"""caffe2.python.cnn on netbrew: CNNModelHelper, the older helper tutorials still import.

Each method is the brew helper of the same family, called with the model first.
"""

from __future__ import annotations

from typing import Any

from netbrew import brew
from netbrew.caffe2.python.model_helper import ModelHelper

_METHODS = {
    "Conv": brew.conv, "ConvTranspose": brew.conv_transpose, "FC": brew.fc,
    "Dropout": brew.dropout, "MaxPool": brew.max_pool, "AveragePool": brew.average_pool,
    "Concat": brew.concat, "Relu": brew.relu, "PRelu": brew.prelu, "Softmax": brew.softmax,
    "SpatialBN": brew.spatial_bn, "Accuracy": brew.accuracy, "Sum": brew.sum,
    "Transpose": brew.transpose, "Iter": brew.iter,
}  # fmt: skip


class CNNModelHelper(ModelHelper):
    """ModelHelper whose Conv/FC/MaxPool/... methods are the brew helpers."""

    def __init__(self, order: str = "NCHW", name: str | None = None, use_cudnn: bool = True,
                 cudnn_exhaustive_search: bool = False, ws_nbytes_limit: Any = None,
                 init_params: bool = True, skip_sparse_optim: bool = False,
                 param_model: Any = None) -> None:  # fmt: skip
        if order != "NCHW":
            raise ValueError(f"CNNModelHelper: order={order!r} is not supported; use NCHW")
        super().__init__(name, init_params=init_params, param_model=param_model)
        self.order = order

    def __getattr__(self, name: str):
        if name in _METHODS:
            helper = _METHODS[name]
            return lambda *args, **kwargs: helper(self, *args, **kwargs)
        return super().__getattr__(name)
