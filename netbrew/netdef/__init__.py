"""NetDef building, printing, checking and serialization."""

from netbrew.netdef.args import arg_value, args_dict, make_arg
from netbrew.netdef.lint import lint, lint_problems
from netbrew.netdef.net import BlobReference, Net, format_net, format_op, op_def
from netbrew.netdef.passes import optimize
from netbrew.netdef.scope import device_scope, name_scope
from netbrew.netdef.serialize import load_blobs, load_net, save_blobs, save_net
from netbrew.netdef.tensor import from_array, to_array

__all__ = [
    "BlobReference",
    "Net",
    "arg_value",
    "args_dict",
    "device_scope",
    "format_net",
    "format_op",
    "from_array",
    "lint",
    "lint_problems",
    "load_blobs",
    "load_net",
    "make_arg",
    "name_scope",
    "op_def",
    "optimize",
    "save_blobs",
    "save_net",
    "to_array",
]
