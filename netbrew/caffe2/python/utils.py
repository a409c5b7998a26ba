"""caffe2.python.utils on netbrew: the helpers scripts import."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from netbrew.netdef.args import make_arg
from netbrew.netdef.tensor import from_array, to_array
from netbrew.proto.netbrew_pb2 import Argument, TensorProto


def debug(fn: Callable) -> Callable:
    """Caffe2 opened pdb on an exception; netbrew lets the exception propagate."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapped


def MakeArgument(key: str, value: Any) -> Argument:  # noqa: N802
    return make_arg(key, value)


def NumpyArrayToCaffe2Tensor(arr: np.ndarray, name: str | None = None) -> TensorProto:  # noqa: N802
    tensor = from_array(np.asarray(arr))
    if name:
        tensor.name = name
    return tensor


def Caffe2TensorToNumpyArray(tensor: TensorProto) -> np.ndarray:  # noqa: N802
    return to_array(tensor)
