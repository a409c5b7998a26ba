"""netbrew: a Caffe2-style graph framework.

Models are NetDefs (protobuf, wire-compatible with Caffe2), built with the Net API or
brew helpers, run by a registry of NumPy operators in a Workspace, and bridged to ONNX.

    import netbrew as nb
    net = nb.Net("mlp")
    ...
    ws = nb.Workspace()
"""

from netbrew.errors import (
    BlobNotFoundError,
    FeedError,
    ModelLoadError,
    OperatorError,
    SchemaError,
    ShapeError,
    UnknownOperatorError,
    UnsupportedConversion,
)
from netbrew.executor import (
    Predictor,
    Workspace,
    get_num_threads,
    num_threads,
    set_num_threads,
)
from netbrew.netdef import Net, load_blobs, load_net, save_blobs, save_net
from netbrew.netdef.model_dir import load_model, save_model
from netbrew.parity import compare

# `netbrew.script` is the function; the package of the same name holds its parts
from netbrew.script import ScriptError, script  # noqa: E402  (isort: keep last)

__version__ = "0.1.0"


__all__ = [
    "BlobNotFoundError",
    "FeedError",
    "ModelLoadError",
    "Net",
    "OperatorError",
    "Predictor",
    "SchemaError",
    "ScriptError",
    "ShapeError",
    "UnknownOperatorError",
    "UnsupportedConversion",
    "Workspace",
    "compare",
    "get_num_threads",
    "load_blobs",
    "load_model",
    "load_net",
    "num_threads",
    "save_blobs",
    "save_model",
    "save_net",
    "script",
    "set_num_threads",
]
