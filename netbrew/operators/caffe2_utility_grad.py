"""SquaredL2DistanceGradient, Caffe2's gradient op of SquaredL2Distance (caffe2_utility.py).

    SquaredL2Distance(X, Y) -> Z    backward: SquaredL2DistanceGradient(X, Y, dZ) -> (dX, dY)

Input gradients that are not wanted are named "" and not computed.
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.caffe2_utility import _rows
from netbrew.operators.schema import kernel, schema

schema(
    "SquaredL2DistanceGradient",
    inputs=["X", "Y", "dZ"],
    outputs=["dX", "dY"],
    dtypes="float",
    onnx=False,
    output_mask=True,
    doc="dX[i] = (X[i] - Y[i]) * dZ[i], dY = -dX, over X and Y flattened to [N, D]; dZ [N]; "
    "dX and dY have X's shape and dtype",
)


@kernel("SquaredL2DistanceGradient")
def squared_l2_distance_gradient_cpu(
    x: np.ndarray, y: np.ndarray, dz: np.ndarray, *, output_mask: tuple[bool, ...]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    x2, y2 = _rows(x, y, "SquaredL2DistanceGradient")
    if dz.size != len(x2):
        raise ShapeError(
            f"SquaredL2DistanceGradient: input 'dZ' has shape {list(dz.shape)}, expected "
            f"[{len(x2)}] (one value per row of X)"
        )
    dx = ((x2 - y2) * dz.reshape(-1, 1)).astype(x.dtype, copy=False).reshape(x.shape)
    return (dx if output_mask[0] else None), (-dx if output_mask[1] else None)
