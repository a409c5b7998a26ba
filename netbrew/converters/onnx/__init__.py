"""NetDef <-> ONNX: export, import_model, and `backend` (an onnx.backend Backend)."""

from netbrew.converters.onnx import backend
from netbrew.converters.onnx.export import export
from netbrew.converters.onnx.importer import import_model

__all__ = ["backend", "export", "import_model"]
