"""caffe2.proto.caffe2_pb2: netbrew's generated messages under Caffe2's module name.

netbrew's proto is wire-compatible with Caffe2's last caffe2.proto, so these are the
same messages; `CPU`, `CUDA` and the other DeviceTypeProto values are here as Caffe2 had
them at module level.
"""

from netbrew.proto.netbrew_pb2 import (  # noqa: F401  (re-exported under Caffe2's names)
    Argument,
    BlobProto,
    DeviceOption,
    DeviceTypeProto,
    ExecutionStep,
    NetDef,
    OperatorDef,
    PlanDef,
    TensorProto,
    TensorProtos,
    TensorShape,
    TensorShapes,
)

CPU = DeviceTypeProto.Value("PROTO_CPU")
CUDA = DeviceTypeProto.Value("PROTO_CUDA")
PROTO_CPU, PROTO_CUDA = CPU, CUDA
