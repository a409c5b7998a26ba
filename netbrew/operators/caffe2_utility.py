"""Caffe2's utility ops that real Caffe2 scripts use: SquaredL2Distance, Scale, Copy,
Alias, EnsureCPUOutput, Print and Summarize, with Caffe2's names, arguments and semantics.

SquaredL2Distance's gradient op (Caffe2's SquaredL2DistanceGradient) lives in
caffe2_utility_grad.py; the makers sit beside the forward ops here, but Summarize's, which
Caffe2 never had, lives with its SummarizeGradient op in summarize_grad.py. Their ONNX
export is in netbrew.converters.onnx.caffe2_utility_to_onnx.

Print and Summarize write output as their job (Caffe2's debugging ops). Caffe2 builds an
op object once and keeps state in it: Print's `every_n` counter and the log file it opens
(truncating it) when the op is created. netbrew kernels are pure functions, so that state
is kept here, per compiled op (see `_PerOpState`): a created net counts its runs and
truncates its files on the first write, as Caffe2's op did, and `run_operator_once` /
`run_net_once` build a fresh op each time, again as Caffe2's RunOperatorOnce did.
"""

from __future__ import annotations

import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.netdef.net import op_def
from netbrew.operators.grad_util import copy_attrs
from netbrew.operators.schema import gradient, kernel, no_gradient, schema

PRINT_LIMIT_DEFAULT = 1000
"""Elements Print writes when `limit` is 0 (Caffe2's k_limit_default_)."""
PRINT_EXTENSION = ".log"
"""Suffix of Print's to_file log (Caffe2's kPrintFileExtension)."""
SUMMARY_EXTENSION = ".summary"
"""Suffix of Summarize's to_file log (Caffe2's kSummaryzeOpExtension)."""

schema(
    "SquaredL2Distance",
    inputs=["X", "Y"],
    outputs=["Z"],
    dtypes="float",
    onnx=False,
    doc="Z[i] = 0.5 * sum_j (X[i, j] - Y[i, j])^2 over X and Y flattened to [N, D] (N = "
    "dim 0, or 1 for a 0-d input); X and Y of one shape; Z [N] in X's dtype",
)
schema(
    "Scale",
    inputs=["X"],
    outputs=["Y"],
    attrs={"scale": 1.0},
    inplace={0: 0},
    dtypes="float",
    onnx=False,
    doc="Y = scale * X in X's dtype; default scale=1.0",
)
schema(
    "Copy",
    inputs=["X"],
    outputs=["Y"],
    onnx=False,
    doc="Y = X, in storage of its own (a copy)",
)
schema(
    "Alias",
    inputs=["input"],
    outputs=["output"],
    onnx=False,
    doc="output = input, sharing input's storage (no copy)",
)
schema(
    "EnsureCPUOutput",
    inputs=["input"],
    outputs=["output"],
    onnx=False,
    doc="output = a CPU copy of input (every netbrew tensor is on the CPU: a copy)",
)
schema(
    "Print",
    inputs=["tensor"],
    outputs=[],
    attrs={"to_file": 0, "limit": 0, "every_n": 1},
    onnx=False,
    wants_names=True,
    doc="writes 'Tensor <name> of type <dtype>. Dims: (d0,d1,): v0,v1,...' (the first "
    "`limit` values in row-major order, 1000 when limit=0) to stdout, or with to_file=1 "
    "to the file <name>.log in the current directory ('/' in the name becomes '#'), on "
    "the 1st, (every_n+1)-th, ... run of the op; no outputs; defaults to_file=0, limit=0, "
    "every_n=1",
)
schema(
    "Summarize",
    inputs=["data"],
    outputs=["output?"],
    attrs={"to_file": 0},
    dtypes="numeric",
    onnx=False,
    wants_names=True,
    doc="output = float32 [min(X), max(X), mean(X), std(X)], std = sqrt(sum((X - mean)^2) "
    "/ (n - 1)) (0 for n = 1) over every element; with to_file=1 also appends the line "
    "'min max mean std' to <name>.summary in the current directory ('/' in the name "
    "becomes '#'); X must not be empty; default to_file=0",
)

no_gradient("Print", "it has no outputs, so nothing downstream depends on it")


class _PerOpState:
    """State kept across runs of one compiled op: Caffe2 stored it in the op object.

    A kernel of an op whose schema sets wants_names receives `input_names`, a tuple that
    compile_op builds once per compiled op and passes on every run; its identity names the
    op. Entries hold the tuple itself, so its id cannot be reused while the entry lives, and
    the least recently used are dropped beyond `capacity` (a dropped op starts counting
    afresh, as if created again), so ops compiled over and over do not pile up.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[int, tuple[Sequence[str], dict[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, names: Sequence[str] | None) -> dict[str, Any]:
        """The mutable state of the op that passes `names`; a fresh one when None."""
        fresh: dict[str, Any] = {"runs": 0, "opened": False}
        if names is None:  # called outside the executor: every call is a first run
            return fresh
        with self._lock:
            entry = self._entries.get(id(names))
            if entry is not None and entry[0] is names:
                self._entries.move_to_end(id(names))
                return entry[1]
            self._entries[id(names)] = (names, fresh)
            if len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
            return fresh


_STATE = _PerOpState()


def _file_name(blob: str, extension: str) -> Path:
    """The log file of a blob in the current directory (Caffe2's RootFolder, '.').

    '/' (name scopes) becomes '#' so the file lands in the directory itself; Caffe2's
    Summarize did so, its Print did not and failed to open the file instead.
    """
    return Path(blob.replace("/", "#") + extension)


def _write_line(path: Path, line: str, state: dict[str, Any]) -> None:
    """Truncates on the op's first write, appends after: Caffe2 opened the file once."""
    with path.open("a" if state["opened"] else "w") as f:
        f.write(line + "\n")
    state["opened"] = True


def _rows(x: np.ndarray, y: np.ndarray, op: str) -> tuple[np.ndarray, np.ndarray]:
    """X and Y as [N, D], N = dim 0 (1 for a 0-d tensor), after checking their shapes agree."""
    if x.shape != y.shape:
        raise ShapeError(
            f"{op}: inputs 'X' {list(x.shape)} and 'Y' {list(y.shape)} must have the same shape"
        )
    n = x.shape[0] if x.ndim else 1
    d = math.prod(x.shape[1:])
    return x.reshape(n, d), y.reshape(n, d)


@kernel("SquaredL2Distance")
def squared_l2_distance_cpu(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray]:
    x2, y2 = _rows(x, y, "SquaredL2Distance")
    # Caffe2 computed (|x|^2 + |y|^2) / 2 - x.y; the same in exact arithmetic, but the
    # difference first does not cancel catastrophically when X is close to Y.
    diff = x2 - y2.astype(x.dtype, copy=False)
    return ((np.sum(diff * diff, axis=1) * x.dtype.type(0.5)).astype(x.dtype, copy=False),)


@gradient("SquaredL2Distance")
def squared_l2_distance_grad(op, g_out, g_in):
    """dX = (X - Y) * dZ[i], dY = -dX, by Caffe2's SquaredL2DistanceGradient."""
    return [
        op_def(
            "SquaredL2DistanceGradient",
            [op.input[0], op.input[1], g_out[0]],
            [g or "" for g in g_in],
        )
    ]


@kernel("Scale")
def scale_cpu(x: np.ndarray, *, scale: float) -> tuple[np.ndarray]:
    return (x * x.dtype.type(scale),)


@gradient("Scale", inplace_safe=True)
def scale_grad(op, g_out, g_in):
    """dX = scale * dY: Scale of dY with the forward op's scale."""
    return [op_def("Scale", [g_out[0]], [g_in[0]], **copy_attrs(op))]


@kernel("Copy")
def copy_cpu(x: Any) -> tuple[Any]:
    return (_copied(x),)


@kernel("EnsureCPUOutput")
def ensure_cpu_output_cpu(x: Any) -> tuple[Any]:
    return (_copied(x),)


def _copied(x: Any) -> Any:
    """A copy with storage of its own (sequences are lists: a list of copies)."""
    if isinstance(x, list):
        return [_copied(v) for v in x]
    return None if x is None else np.array(x, copy=True)


@kernel("Alias")
def alias_cpu(x: Any) -> tuple[Any]:
    return (x,)


def _pass_through(op_type: str) -> Callable:
    """A maker giving dX = dY through the op itself (Copy of dY, Alias of dY, ...)."""

    def maker(op, g_out, g_in):
        return [op_def(op_type, [g_out[0]], [g_in[0]])]

    maker.__name__ = f"{op_type.lower()}_grad"
    maker.__doc__ = f"dX = dY, through {op_type}."
    return maker


# Caffe2 registered no gradient for Alias and EnsureCPUOutput (NO_GRADIENT /
# SHOULD_NOT_DO_GRADIENT), but both are the identity in math, and netbrew declares
# no_gradient only where math has none: the gradient passes through.
for _op in ("Copy", "Alias", "EnsureCPUOutput"):
    gradient(_op)(_pass_through(_op))


def _format_value(v: Any) -> str:
    """One value as C++'s `ostream << v` wrote it: floats with 6 significant digits
    (%g), bools as 1 and 0."""
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return str(v)


def tensor_line(name: str, x: Any, limit: int) -> str:
    """Caffe2's TensorPrinter line: 'Tensor <name> of type <dtype>. Dims: (d0,d1,): v0,v1'.

    The type is NumPy's dtype name (Caffe2 wrote its C++ type name: float for float32).
    """
    if not isinstance(x, np.ndarray):  # an ONNX sequence or an empty optional
        return f"Blob {name} of type {type(x).__name__}"
    dims = "".join(f"{d}," for d in x.shape)
    values = ",".join(_format_value(v) for v in x.reshape(-1)[:limit])
    return f"Tensor {name} of type {x.dtype}. Dims: ({dims}): {values}"


@kernel("Print")
def print_cpu(
    x: Any,
    *,
    to_file: int,
    limit: int,
    every_n: int,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple:
    """Writes the tensor's line on the 1st, (every_n+1)-th, ... run; see the schema."""
    if every_n < 1:
        raise SchemaError(f"Print: argument 'every_n' is {every_n}, expected 1 or more")
    if limit < 0:
        raise SchemaError(f"Print: argument 'limit' is {limit}, expected 0 (1000) or more")
    name = input_names[0] if input_names else ""
    # A stateless op (prints every run, to stdout) keeps no entry in _STATE.
    stateful = every_n > 1 or bool(to_file)
    state = _STATE.get(input_names if stateful else None)
    run = state["runs"]
    state["runs"] = run + 1
    if run % every_n:
        return ()
    line = tensor_line(name, x, limit or PRINT_LIMIT_DEFAULT)
    if to_file:
        _write_line(_file_name(name, PRINT_EXTENSION), line, state)
    else:
        # Caffe2 logged to stderr through glog; stdout is where a Python user looks.
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    return ()


@kernel("Summarize")
def summarize_cpu(
    x: np.ndarray,
    *,
    to_file: int,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> tuple[np.ndarray]:
    if x.size == 0:
        raise ShapeError(
            f"Summarize: input 'data' of shape {list(x.shape)} is empty; min and max need "
            "at least one value"
        )
    # float64 sums as Caffe2's newer kernel did (mean and std in double).
    v = x.reshape(-1).astype(np.float64)
    mean = float(np.mean(v))
    std = math.sqrt(float(np.sum((v - mean) ** 2)) / (v.size - 1)) if v.size > 1 else 0.0
    stats = np.array([np.min(v), np.max(v), mean, std], dtype=np.float32)
    if to_file:
        name = input_names[0] if input_names else ""
        state = _STATE.get(input_names)
        line = " ".join(f"{float(s):g}" for s in (np.min(v), np.max(v), mean, std))
        _write_line(_file_name(name, SUMMARY_EXTENSION), line, state)
    return (stats,)
