"""ONNX AttributeProto <-> netbrew Argument, subgraphs included."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from netbrew.errors import UnsupportedConversion
from netbrew.netdef.tensor import from_array
from netbrew.proto.netbrew_pb2 import Argument, NetDef

A = AttributeProto


def tensor_to_array(tensor: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """An ONNX tensor as an ndarray (external data read relative to `base_dir`)."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        if base_dir is None:
            raise UnsupportedConversion(
                f"tensor {tensor.name!r} keeps its data in an external file; load the model "
                "from its path so the file can be found"
            )
        return numpy_helper.to_array(tensor, base_dir)
    return numpy_helper.to_array(tensor)


def to_argument(
    attr: AttributeProto, graph_to_net: Callable[[onnx.GraphProto], NetDef]
) -> Argument:
    """Converts one ONNX attribute; graphs go through `graph_to_net`."""
    arg = Argument(name=attr.name)
    kind = attr.type
    if kind == A.FLOAT:
        arg.f = attr.f
    elif kind == A.INT:
        arg.i = attr.i
    elif kind == A.STRING:
        arg.s = attr.s
    elif kind == A.TENSOR:
        arg.t.CopyFrom(from_array(tensor_to_array(attr.t), attr.t.name or None, raw=True))
    elif kind == A.GRAPH:
        arg.n.CopyFrom(graph_to_net(attr.g))
    elif kind == A.FLOATS:
        arg.floats.extend(attr.floats)
    elif kind == A.INTS:
        arg.ints.extend(attr.ints)
    elif kind == A.STRINGS:
        arg.strings.extend(attr.strings)
    elif kind == A.TENSORS:
        arg.tensors.extend(from_array(tensor_to_array(t), raw=True) for t in attr.tensors)
    elif kind == A.GRAPHS:
        arg.nets.extend(graph_to_net(g) for g in attr.graphs)
    elif kind in (A.TYPE_PROTO, A.TYPE_PROTOS):
        protos = [attr.tp] if kind == A.TYPE_PROTO else list(attr.tps)
        arg.strings.extend(b"onnx.TypeProto:" + tp.SerializeToString() for tp in protos)
    elif kind == A.SPARSE_TENSOR:
        arg.t.CopyFrom(from_array(_dense(attr.sparse_tensor), raw=True))
    else:
        raise UnsupportedConversion(f"attribute {attr.name!r}: type {A.AttributeType.Name(kind)}")
    return arg


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices)
    dense = np.zeros(int(np.prod(sparse.dims)), dtype=values.dtype)
    flat = indices if indices.ndim == 1 else np.ravel_multi_index(indices.T, tuple(sparse.dims))
    dense[flat] = values
    return dense.reshape(tuple(sparse.dims))
