"""netbrew's protobuf schema (`netbrew.proto`) and its generated module. No logic here."""

from netbrew.proto import netbrew_pb2

__all__ = ["netbrew_pb2"]
