"""The generated module matches the .proto, and the wire format matches Caffe2's."""

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from netbrew.proto import netbrew_pb2 as pb

PROTO_DIR = Path(pb.__file__).parent
REPO = PROTO_DIR.parents[1]

# Field numbers of Caffe2's last caffe2.proto (pytorch/pytorch, before Caffe2's removal).
CAFFE2_FIELDS = {
    "TensorProto": {
        "dims": 1, "data_type": 2, "float_data": 3, "int32_data": 4, "byte_data": 5,
        "string_data": 6, "name": 7, "device_detail": 8, "double_data": 9, "int64_data": 10,
        "segment": 11, "raw_data": 13, "data_format": 15,
    },
    "TensorProtos": {"protos": 1},
    "TensorShape": {"dims": 1, "data_type": 2, "unknown_dims": 3, "unknown_shape": 4, "name": 5},
    "Argument": {
        "name": 1, "f": 2, "i": 3, "s": 4, "floats": 5, "ints": 6, "strings": 7, "n": 8,
        "nets": 9, "t": 10, "tensors": 11, "qtensors": 12,
    },
    "DeviceOption": {
        "device_type": 1, "device_id": 2, "random_seed": 3, "node_name": 4, "numa_node_id": 5,
        "extra_info": 6,
    },
    "OperatorDef": {
        "input": 1, "output": 2, "name": 3, "type": 4, "arg": 5, "device_option": 6,
        "engine": 7, "control_input": 8, "is_gradient_op": 9, "debug_info": 10, "domain": 11,
        "op_version": 12,
    },
    "NetDef": {
        "name": 1, "op": 2, "type": 3, "num_workers": 4, "device_option": 5, "arg": 6,
        "external_input": 7, "external_output": 8, "partition_info": 9,
    },
    "ExecutionStep": {
        "name": 1, "substep": 2, "network": 3, "num_iter": 4, "criteria_network": 5,
        "concurrent_substeps": 6, "report_net": 7, "report_interval": 8,
        "should_stop_blob": 9, "only_once": 10, "run_every_ms": 11, "create_workspace": 12,
        "num_concurrent_instances": 13,
    },
    "PlanDef": {"name": 1, "network": 2, "execution_step": 3},
    "BlobProto": {
        "name": 1, "type": 2, "tensor": 3, "content": 4, "qtensor": 5, "content_num_chunks": 6,
        "content_chunk_id": 7,
    },
}  # fmt: skip
CAFFE2_DATA_TYPES = {
    "UNDEFINED": 0, "FLOAT": 1, "INT32": 2, "BYTE": 3, "STRING": 4, "BOOL": 5, "UINT8": 6,
    "INT8": 7, "UINT16": 8, "INT16": 9, "INT64": 10, "FLOAT16": 12, "DOUBLE": 13,
    "ZERO_COLLISION_HASH": 14, "REBATCHING_BUFFER": 15,
}  # fmt: skip


@pytest.mark.parametrize("message", sorted(CAFFE2_FIELDS))
def test_field_numbers_match_caffe2(message):
    fields = getattr(pb, message).DESCRIPTOR.fields_by_name
    for name, number in CAFFE2_FIELDS[message].items():
        assert fields[name].number == number, f"{message}.{name}"
    extensions = {f.name: f.number for f in fields.values()}.keys() - CAFFE2_FIELDS[message]
    for name in extensions:
        assert fields[name].number >= 1000, f"extension {message}.{name} must take a new number"


def test_data_type_values_match_caffe2():
    for name, value in CAFFE2_DATA_TYPES.items():
        assert pb.TensorProto.DataType.Value(name) == value
    extra = set(pb.TensorProto.DataType.keys()) - set(CAFFE2_DATA_TYPES)
    assert extra and all(pb.TensorProto.DataType.Value(n) >= 16 for n in extra)


def test_float_fields_are_packed_like_caffe2():
    # packed encoding is what makes re-saved Caffe2 files byte-identical
    t = pb.TensorProto(float_data=[1.0, 2.0])
    assert t.SerializeToString() == b"\x1a\x08" + b"\x00\x00\x80?\x00\x00\x00@"


def test_generated_module_is_up_to_date(tmp_path):
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is in [test]")
    del protoc
    cmd = [
        sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_DIR}",
        f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", str(PROTO_DIR / "netbrew.proto"),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    for name in ("netbrew_pb2.py", "netbrew_pb2.pyi"):
        fresh = (tmp_path / name).read_text()
        assert fresh == (PROTO_DIR / name).read_text(), (
            f"{name} is stale: regenerate with `python -m grpc_tools.protoc -Inetbrew/proto "
            "--python_out=netbrew/proto --pyi_out=netbrew/proto netbrew/proto/netbrew.proto`"
        )


def declared_protobuf_lower_bound() -> str:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    requires = cfg["options"]["install_requires"]
    return re.search(r"protobuf>=([\d.]+)", requires).group(1)


def test_lower_bound_protobuf_runtime_imports_module():
    """.ci/run installs the declared lower bound into NETBREW_PROTOBUF_LOWER_BOUND_DIR."""
    target = os.environ.get("NETBREW_PROTOBUF_LOWER_BOUND_DIR")
    if not target:
        pytest.skip("set NETBREW_PROTOBUF_LOWER_BOUND_DIR to a pip --target dir (as .ci/run does)")
    want = declared_protobuf_lower_bound()
    code = (
        "import google.protobuf as g, netbrew.proto.netbrew_pb2 as pb;"
        "n = pb.NetDef(name='x'); n.op.add(type='Relu');"
        "assert pb.NetDef.FromString(n.SerializeToString()) == n;"
        "print(g.__version__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([target, str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want
