"""Reading and writing NetDefs and tensors: binary `.pb` or text `.pbtxt`, by suffix.

Writes are atomic (temp file + rename), so a crash never leaves a truncated model.
Reads never trust the file: anything that is not a well-formed message of the expected
kind raises ModelLoadError naming the path and the problem.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import message as pb_message
from google.protobuf import text_format
from google.protobuf.unknown_fields import UnknownFieldSet

from netbrew.errors import ModelLoadError
from netbrew.netdef.tensor import from_array, to_array
from netbrew.proto.netbrew_pb2 import NetDef, TensorProtos

PathLike = str | os.PathLike
TEXT_SUFFIXES = (".pbtxt", ".prototxt", ".txt")
BINARY_SUFFIXES = (".pb", ".bin")


def _is_text(path: Path) -> bool:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return True
    if suffix in BINARY_SUFFIXES:
        return False
    raise ValueError(f"{path}: unknown suffix {path.suffix!r}; use .pb (binary) or .pbtxt (text)")


def write_atomic(path: PathLike, data: bytes) -> None:
    """Writes `data` to a temp file beside `path`, flushes it, then renames it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _serialize(message: pb_message.Message, path: Path) -> bytes:
    if _is_text(path):
        return text_format.MessageToString(message).encode()
    return message.SerializeToString()


def _parse(message: pb_message.Message, path: PathLike, what: str) -> pb_message.Message:
    """Parses `path` into `message`, turning every failure into ModelLoadError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelLoadError(f"{path}: is a directory, expected a {what} file") from None
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read: {e.strerror}") from e
    if not data.strip():
        raise ModelLoadError(f"{path}: file is empty, expected a {what}")
    kind = message.DESCRIPTOR.name
    if _is_text(path):
        try:
            text_format.Parse(data.decode("utf-8"), message)
        except (text_format.ParseError, UnicodeDecodeError) as e:
            raise ModelLoadError(f"{path}: not a text-format {kind}: {e}") from e
        return message
    try:
        message.ParseFromString(data)
    except (pb_message.DecodeError, RuntimeError, ValueError) as e:
        raise ModelLoadError(
            f"{path}: not a valid binary {kind} ({len(data)} bytes): {e}; "
            "the file may be truncated or corrupt"
        ) from e
    unknown = _unknown_field_numbers(message)
    if unknown:
        raise ModelLoadError(
            f"{path}: not a {kind}: it holds fields {kind} does not have "
            f"(numbers {', '.join(map(str, unknown))}){_guess(data)}"
        )
    return message


def _unknown_field_numbers(message: pb_message.Message) -> list[int]:
    """Field numbers the parser did not recognise, in this message or nested ones."""
    numbers = sorted({f.field_number for f in UnknownFieldSet(message)})
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        values = value if field.is_repeated else [value]
        for item in values:
            numbers += _unknown_field_numbers(item)
    return sorted(set(numbers))


def _guess(data: bytes) -> str:
    """A hint when the bytes look like a known other format."""
    try:
        import onnx

        model = onnx.ModelProto()
        model.ParseFromString(data)
        if model.graph.node or model.ir_version:
            return "; it looks like an ONNX model: use netbrew.converters.onnx.import_model"
    except Exception:  # any failure just means "no guess"
        pass
    return ""


def save_net(net: Any, path: PathLike) -> Path:
    """Writes a Net or NetDef to `path`: binary for .pb, text for .pbtxt. Atomic.

    Returns:
        The path written.
    """
    proto = net.proto() if hasattr(net, "proto") else net
    path = Path(path)
    write_atomic(path, _serialize(proto, path))
    return path


def load_net(path: PathLike) -> NetDef:
    """Reads a NetDef from a .pb (binary) or .pbtxt (text) file.

    Raises:
        ModelLoadError: the file is missing, empty, truncated, or not a NetDef.
    """
    return _parse(NetDef(), path, "NetDef")


def save_blobs(blobs: Mapping[str, Any], path: PathLike, *, raw: bool = False) -> Path:
    """Writes named arrays as a TensorProtos message (.pb or .pbtxt). Atomic."""
    protos = TensorProtos(protos=[from_array(v, name, raw=raw) for name, v in blobs.items()])
    path = Path(path)
    write_atomic(path, _serialize(protos, path))
    return path


def load_blobs(path: PathLike) -> dict[str, np.ndarray]:
    """Reads a TensorProtos file into a name -> array dict.

    Raises:
        ModelLoadError: the file is not a TensorProtos, or a tensor is malformed.
    """
    protos = _parse(TensorProtos(), path, "TensorProtos")
    out = {}
    for i, proto in enumerate(protos.protos):
        try:
            out[proto.name or f"tensor_{i}"] = to_array(proto)
        except ModelLoadError as e:
            raise ModelLoadError(f"{path}: {e}") from None
    return out
