"""FusedElementwise steps compiled by numba into one loop (DESIGN §8).

The steps of a FusedElementwise are known when its op is created, so each op (op types,
slots, outputs, attributes, dtype) becomes the Python source of one loop whose body
computes every step on one element in registers, a DAG as readily as a chain (a step's
result is a local variable that later steps read): each X is read once and each Y
written once, where the NumPy kernel makes a pass over memory per step. The source is
written to a module file in the cache directory (NETBREW_CACHE_DIR, default
~/.cache/netbrew, then `fused/`), so numba's `cache=True` keeps its machine code from
process to process; the compile (or the load) counts in `jit.compile_seconds()`.

Broadcasting: the inputs are broadcast to the outputs' shape (zero strides, no copy) and
the axes that every array walks alike are merged, as NumPy's iterator does. When at most
three axes remain (a tensor, a per-channel (C, 1, 1) parameter, a scalar: what the fusion
pass makes of BatchNorm, bias and activations) the loop runs over them; otherwise, or for
any dtype but float32/float64, for outputs of different shapes, for a Clip bound of more
than one value, or for inputs that do not broadcast, `run` returns None and the NumPy
kernel runs (and raises its errors). Results equal the NumPy kernel's to rounding: exp,
log and tanh come from LLVM's math library, not NumPy's.

When the loop pays: see TRANSCENDENTAL and MIN_SIZE (measured, interleaved, medians).
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from netbrew import jit

ABSENT, STEP = -2, -3  # slot codes, as netbrew.operators.fused_elementwise's (normalised)
_FLOATS = {np.dtype(np.float32): "np.float32", np.dtype(np.float64): "np.float64"}
_UNARY = {
    "Neg": "-{a}",
    "Abs": "abs({a})",
    "Exp": "np.exp({a})",
    "Log": "np.log({a})",
    "Sqrt": "np.sqrt({a})",
    "Reciprocal": "{T}(1.0) / {a}",
    "Tanh": "np.tanh({a})",
    "Relu": "{a} if {a} >= {T}(0.0) or {a} != {a} else {T}(0.0)",
}
_BINARY = {
    "Add": "{a} + {b}",
    "Sum": "{a} + {b}",
    "Sub": "{a} - {b}",
    "Mul": "{a} * {b}",
    "Div": "{a} / {b}",
    "Max": "{a} if {a} >= {b} or {a} != {a} else {b}",  # NaN wins, as np.maximum
    "Min": "{a} if {a} <= {b} or {a} != {a} else {b}",
}
_kernels: dict[str, jit.Kernel] = {}
_by_plan: dict[tuple[int, str, int], tuple[Any, jit.Kernel]] = {}
_shapes: dict[tuple, tuple[Any, tuple | None]] = {}
_MEMO = 4096  # entries kept in each of the two memos above

TRANSCENDENTAL = frozenset({"Exp", "Log", "Tanh", "Sigmoid"})
"""Steps the loop computes with scalar libm calls, where NumPy's ufuncs run SIMD code: a
plan with one runs the NumPy kernel. Measured loop / NumPy kernel, float32, 1-D, medians
of 100 interleaved calls, 2 loaded cores: Tanh 3.4x at 512 elements, 10x at 8192, 27x at
131072; Exp, Add 2.5-3.9x; Sigmoid, Mul 1.4-2.1x; the LSTM cell's 9 steps 3.5x at
8192 (the loop alone, without its set-up, 0.6x at 512)."""
MIN_SIZE = 1 << 15
"""Elements below which the NumPy kernel runs: the loop's set-up (views, strides, the
call into numba) costs more than the passes it saves. Add, Relu, Mul, loop / NumPy:
2.1x at 512 elements, 1.9x at 8192, 1.2x at 131072 (contiguous 1-D, where NumPy is at
its best; per-channel broadcasting on densenet shapes measured 0.4-0.8x, ba8551e)."""
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where generated chain modules (and numba's cache of them) live."""
    root = os.environ.get("NETBREW_CACHE_DIR") or Path.home() / ".cache" / "netbrew"
    return Path(root) / "fused"


def _step_lines(op: str, names: list[str], attrs: dict, T: str) -> list[str]:
    """Statements computing step `op` into r from the element names `names`."""
    a = names[0]
    if op in _BINARY:
        return [f"r = {_BINARY[op].format(a=a, b=names[1])}"]
    if op in _UNARY:
        return [f"r = {_UNARY[op].format(a=a, T=T)}"]
    if op == "LeakyRelu":
        return [f"r = {a} if {a} >= {T}(0.0) else {T}({attrs['alpha']!r}) * {a}"]
    if op == "Sigmoid":  # as the kernel: e = exp(-|x|), 1 / (1 + e) or e / (1 + e)
        return [
            f"e = np.exp(-abs({a}))",
            f"r = ({T}(1.0) if {a} >= {T}(0.0) else e) / ({T}(1.0) + e)",
        ]
    if op == "HardSigmoid":
        return [
            f"r = {T}({attrs['alpha']!r}) * {a} + {T}({attrs['beta']!r})",
            f"r = {T}(0.0) if r < {T}(0.0) else ({T}(1.0) if r > {T}(1.0) else r)",
        ]
    if op == "Clip":
        lines = [f"r = {a}"]
        if names[1] is not None:
            lines.append(f"r = r if r >= {names[1]} or r != r else {names[1]}")
        if names[2] is not None:
            lines.append(f"r = r if r <= {names[2]} or r != r else {names[2]}")
        return lines
    raise KeyError(op)


def source(steps: tuple, n_inputs: int, dtype: np.dtype, outputs: tuple[int, ...] = ()) -> str:
    """The Python source of the steps' loop: `chain(out0, ..., x0, x1, ...)` over 3-D
    arrays, out i receiving step `outputs[i]`'s result (default: the last step's)."""
    T = _FLOATS[dtype]
    outputs = outputs or (len(steps) - 1,)
    outs = ", ".join(f"out{i}" for i in range(len(outputs)))
    args = ", ".join(f"x{i}" for i in range(n_inputs))
    body = [f"v{i} = x{i}[a, b, c]" for i in range(n_inputs)]
    for k, (op, where, attrs) in enumerate(steps):
        names = [f"s{STEP - s}" if s <= STEP else None if s == ABSENT else f"v{s}" for s in where]
        body += _step_lines(op, names, attrs, T)
        body.append(f"s{k} = r")
    body += [f"out{i}[a, b, c] = s{k}" for i, k in enumerate(outputs)]
    inner = "".join(f"                {line}\n" for line in body)
    return (
        '"""A FusedElementwise op, generated by netbrew.operators.fused_jit."""\n\n'
        "import numpy as np\n\nfrom netbrew import jit\n\n\n"
        f"def chain({outs}, {args}):\n"
        "    rows, cols, size = out0.shape\n"
        "    for ab in jit.prange(rows * cols):\n"
        "        a, b = ab // cols, ab % cols\n"
        "        for c in range(size):\n"
        f"{inner}\n\n"
        'kernel = jit.Kernel(chain, parallel=True, fastmath=False, error_model="numpy")\n'
    )


def chain_kernel(
    steps: tuple, n_inputs: int, dtype: np.dtype, outputs: tuple[int, ...] = ()
) -> jit.Kernel:
    """The compiled loop of the steps: generated and written once, memoised per process."""
    text = source(steps, n_inputs, dtype, outputs)
    key = hashlib.sha256(text.encode()).hexdigest()[:24]
    found = _kernels.get(key)
    if found is not None:
        return found
    with _lock:
        if key in _kernels:
            return _kernels[key]
        path = cache_dir() / f"chain_{key}.py"
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)  # atomic: a process beside this one reads a whole file
        spec = importlib.util.spec_from_file_location(f"netbrew_fused_{key}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # numba's cache locates a kernel by its module
        spec.loader.exec_module(module)
        _kernels[key] = module.kernel
        return module.kernel


def merged_axes(shape: tuple[int, ...], arrays: list[np.ndarray]) -> list[tuple[int, list[int]]]:
    """Y's axes after dropping size-1 axes and merging neighbours that every array in
    `arrays` (each of Y's shape) steps through as one: (size, strides per array) each."""
    axes = [(n, [a.strides[d] for a in arrays]) for d, n in enumerate(shape) if n != 1]
    merged: list[tuple[int, list[int]]] = []
    for n, strides in axes:
        if merged:
            m, outer = merged[-1]
            if all(o == s * n for o, s in zip(outer, strides)):
                merged[-1] = (m * n, strides)
                continue
        merged.append((n, strides))
    return merged


def _loop_shape(inputs: tuple, plan) -> tuple[tuple[int, ...], set[int]] | None:
    """(the shape every output has, the inputs read as operands rather than as Clip's
    bounds), or None where the loop cannot run: outputs of different shapes, a bound
    that is not one value, inputs that do not broadcast (the NumPy kernel raises)."""
    shapes: list[tuple[int, ...]] = []
    operands: set[int] = set()
    try:
        for op, where, _ in plan.steps:
            mine = []
            for k, s in enumerate(where):
                shape = () if s == ABSENT else shapes[STEP - s] if s <= STEP else inputs[s].shape
                if op == "Clip" and k:
                    if math.prod(shape) != 1:
                        return None
                    continue
                if s >= 0:
                    operands.add(s)
                mine.append(shape)
            shapes.append(np.broadcast_shapes(*mine))
    except ValueError:
        return None
    shape = shapes[plan.outputs[0]]
    if any(shapes[o] != shape for o in plan.outputs):
        return None
    if any(np.broadcast_shapes(shape, inputs[s].shape) != shape for s in operands):
        return None  # a step's result broadcast, in a step whose result is no output
    return shape, operands


def _memo(cache: dict, key: tuple, plan: Any, make) -> Any:
    """cache[key]'s value for `plan` (keys hold plan ids: an entry holds its plan, so the
    id is not reused while it lives), made by make() on a miss."""
    hit = cache.get(key)
    if hit is not None and hit[0] is plan:
        return hit[1]
    value = make()
    if len(cache) >= _MEMO:
        cache.pop(next(iter(cache)))
    cache[key] = (plan, value)
    return value


def run(inputs: tuple, plan: Any, *, choose: bool = True) -> tuple[np.ndarray, ...] | None:
    """The outputs of a FusedElementwise Plan (netbrew.operators.fused_elementwise) through
    its compiled loop, or None where the NumPy kernel must (or, by TRANSCENDENTAL and
    MIN_SIZE, should) run. `choose=False` runs the loop wherever it can (tests compare it
    with the NumPy kernel)."""
    if not jit.enabled() or not inputs:
        return None
    if choose and any(op in TRANSCENDENTAL for op, _, _ in plan.steps):
        return None
    dtype = getattr(inputs[0], "dtype", None)
    if dtype not in _FLOATS or not all(
        isinstance(x, np.ndarray) and x.dtype == dtype for x in inputs
    ):
        return None
    shapes = tuple(x.shape for x in inputs)
    found = _memo(_shapes, (id(plan), shapes), plan, lambda: _loop_shape(inputs, plan))
    if found is None or math.prod(found[0]) < (MIN_SIZE if choose else 1):
        return None
    shape, operands = found
    outs = [np.empty(shape, dtype) for _ in plan.outputs]
    views = [
        np.broadcast_to(x if i in operands else x.reshape(()), shape) for i, x in enumerate(inputs)
    ]
    axes = merged_axes(shape, [*outs, *views])
    if len(axes) > 3:
        return None
    axes = [(1, [0] * (len(views) + len(outs)))] * (3 - len(axes)) + axes
    dims = tuple(n for n, _ in axes)
    flat = [
        as_strided(a, dims, tuple(s[i] for _, s in axes), writeable=i < len(outs))
        for i, a in enumerate([*outs, *views])
    ]
    key = (id(plan), dtype.char, len(inputs))
    kernel = _memo(
        _by_plan, key, plan, lambda: chain_kernel(plan.steps, len(inputs), dtype, plan.outputs)
    )
    kernel(*flat)
    return tuple(outs)
