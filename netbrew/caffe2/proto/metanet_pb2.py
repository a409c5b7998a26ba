"""caffe2.proto.metanet_pb2: netbrew's generated MetaNetDef messages under Caffe2's name.

netbrew.proto holds Caffe2's metanet.proto messages with the same fields and numbers.
"""

from netbrew.proto.netbrew_pb2 import (  # noqa: F401  (re-exported under Caffe2's names)
    BlobsMap,
    MetaNetDef,
    ModelInfo,
    NetsMap,
    PlansMap,
    StringMap,
)
