"""NetDef <-> ONNX: import_model, export, and `backend` (an onnx.backend Backend)."""

from netbrew.converters.onnx import backend
from netbrew.converters.onnx.importer import import_model

__all__ = ["backend", "import_model"]
