"""cuDNN through ctypes: convolutions forward and backward, as Caffe2's engine="CUDNN" ran them.

The library is looked for in the NVIDIA wheels (nvidia-cudnn-cu12/-cu13: nvidia/cudnn/lib),
then where the linker finds "cudnn", then in the CUDA toolkit's folders. cuDNN 9 splits its
API over sub-libraries (libcudnn_ops, _cnn, _graph, _heuristic, the engines) that its
libcudnn.so.9 opens by name; they are opened first from the same folder with RTLD_GLOBAL
so that it finds them. Nothing loads before a conv first runs on a GPU.

`plan` answers None, and netbrew's own im2col + cuBLAS kernels run the conv, where cuDNN
does not load, where NETBREW_CUDNN=0, for single images (MIN_BATCH), more than 3 spatial
axes, asymmetric pads, empty tensors, or when no algorithm fits WORKSPACE_BYTES. Convs run
in strict float32 (CUDNN_FMA_MATH: no TF32 tensor cores), so they match the CPU kernels to
float32 rounding. Each geometry's descriptors and algorithms are made once and kept.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from netbrew.cuda import DeviceError
from netbrew.cuda.cublas import toolkit_roots

WHEEL_DIRS = (("nvidia.cudnn", "lib"), ("nvidia.cu13", "lib"), ("nvidia.cu12", "lib"))
SUBLIBS = ("graph", "engines_precompiled", "engines_runtime_compiled", "heuristic", "ops",
           "cnn", "adv")  # fmt: skip
WORKSPACE_BYTES = 1 << 30
# Single images stay on im2col + cuBLAS: on an H200, light-zoo ResNet-50 at batch 1 ran
# 12.1 ms that way and 16.0 ms through cuDNN's strict-float32 algorithms, where batch 32
# ran 26.8 and 18.0 ms, and the ResNet-18-sized training step (batch 64) 60.4 and 27.1 ms.
MIN_BATCH = 2
# NETBREW_CUDNN_BENCHMARK=1 times each geometry's algorithms on its first run, as
# torch.backends.cudnn.benchmark does: cuDNN's first heuristic pick ran a 64x64x32x32 3x3
# conv of the ResNet-18-sized step in 502 us (FFT) where another took 95, and its dX in
# 199 where one took 90 (H200, one call's host and GPU time at full queue). Off by default
# until it has run on a GPU (docs/cuda.md); the heuristic's first pick otherwise.
BENCHMARK_RUNS = 3
FLOAT, NCHW, CROSS_CORRELATION, FMA_MATH = 0, 0, 1, 3
TENSOR_OP_MATHS = (1, 2)  # TF32 or converted: not taken

_lock = threading.Lock()
_libs: list[Any] | None = None
_error: str | None = None
_handles: dict[int, ctypes.c_void_p] = {}
_plans: dict[tuple, Any] = {}


def _folders() -> list[str]:
    found = []
    for package, sub in WHEEL_DIRS:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec else []:
            found.append(os.path.join(root, sub))
    for root in toolkit_roots():
        found += [os.path.join(root, "lib64"), *glob.glob(os.path.join(root, "targets/*/lib"))]
    return found


def load() -> list[Any]:
    """The loaded cuDNN libraries (the shim first); DeviceError when none loads."""
    global _libs, _error
    with _lock:
        if _libs is not None:
            return _libs
        if _error is None:
            tried = []
            for folder in _folders():
                shim = sorted(glob.glob(os.path.join(folder, "libcudnn.so.*")), key=len)
                if not shim:
                    continue
                libs = []
                for name in SUBLIBS:
                    for path in sorted(glob.glob(os.path.join(folder, f"libcudnn_{name}.so.*")),
                                       key=len)[:1]:  # fmt: skip
                        try:
                            libs.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
                        except OSError as e:
                            tried.append(f"{path} ({e})")
                try:
                    _libs = [ctypes.CDLL(shim[0], mode=ctypes.RTLD_GLOBAL), *libs[::-1]]
                    return _libs
                except OSError as e:
                    tried.append(f"{shim[0]} ({e})")
            system = ctypes.util.find_library("cudnn")
            if system:
                try:
                    _libs = [ctypes.CDLL(system, mode=ctypes.RTLD_GLOBAL)]
                    return _libs
                except OSError as e:
                    tried.append(f"{system} ({e})")
            _error = "cuDNN could not be loaded" + (f"; tried {'; '.join(tried)}" if tried else "")
        raise DeviceError(f"{_error}. pip install nvidia-cudnn-cu13 (or -cu12) for cuDNN")


def _fn(name: str) -> Any:
    for lib in load():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return fn
    raise DeviceError(f"cuDNN has no function {name}")


def benchmark() -> bool:
    """Whether a conv geometry's algorithms are timed on first use (BENCHMARK_RUNS)."""
    return os.environ.get("NETBREW_CUDNN_BENCHMARK", "0") == "1"


def enabled() -> bool:
    """Whether convs go to cuDNN: it loads and NETBREW_CUDNN is not 0."""
    if os.environ.get("NETBREW_CUDNN", "1") == "0":
        return False
    try:
        load()
    except DeviceError:
        return False
    return True


def _check(status: int, what: str) -> None:
    if status:
        text = _fn("cudnnGetErrorString")
        text.restype = ctypes.c_char_p
        raise DeviceError(f"{what} failed: {text(status).decode()} ({status})")


def handle(device: int) -> ctypes.c_void_p:
    """This device's cuDNN handle, made in its (current) context; it runs on the default
    stream, as the other kernels do."""
    with _lock:
        h = _handles.get(device)
    if h is None:
        h = ctypes.c_void_p()
        _check(_fn("cudnnCreate")(ctypes.byref(h)), "cudnnCreate")
        with _lock:
            _handles[device] = h
    return h


class _AlgoPerf(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_int), ("status", ctypes.c_int), ("time", ctypes.c_float),
                ("memory", ctypes.c_size_t), ("determinism", ctypes.c_int),
                ("math_type", ctypes.c_int), ("reserved", ctypes.c_int * 3)]  # fmt: skip


def _ints(values: Sequence[int]) -> Any:
    return (ctypes.c_int * len(values))(*[int(v) for v in values])


def _descriptor(kind: str) -> ctypes.c_void_p:
    d = ctypes.c_void_p()
    _check(_fn(f"cudnnCreate{kind}Descriptor")(ctypes.byref(d)), f"cudnnCreate{kind}Descriptor")
    return d


def _tensor(shape: Sequence[int]) -> ctypes.c_void_p:
    d = _descriptor("Tensor")
    strides = np.cumprod([1, *shape[:0:-1]])[::-1]
    status = _fn("cudnnSetTensorNdDescriptor")(d, FLOAT, len(shape), _ints(shape), _ints(strides))
    _check(status, f"cudnnSetTensorNdDescriptor {tuple(shape)}")
    return d


def _ptr(a: Any) -> ctypes.c_void_p:
    return ctypes.c_void_p(int(a.gpudata) if a is not None and a.size else 0)


class Plan:
    """One conv geometry in cuDNN: x (N, C, *image), w (M, C/group, *kernel), y (N, M, *out)."""

    def __init__(self, device: int, x_shape, w_shape, y_shape, pads, strides, dilations, group):
        self.device = device
        self.h = handle(device)
        self.x, self.y = _tensor(x_shape), _tensor(y_shape)
        self.w = _descriptor("Filter")
        status = _fn("cudnnSetFilterNdDescriptor")(
            self.w, FLOAT, NCHW, len(w_shape), _ints(w_shape)
        )
        _check(status, f"cudnnSetFilterNdDescriptor {tuple(w_shape)}")
        self.conv = _descriptor("Convolution")
        n = len(pads)
        status = _fn("cudnnSetConvolutionNdDescriptor")(
            self.conv, n, _ints(pads), _ints(strides), _ints(dilations), CROSS_CORRELATION, FLOAT
        )
        _check(status, "cudnnSetConvolutionNdDescriptor")
        _check(
            _fn("cudnnSetConvolutionGroupCount")(self.conv, group), "cudnnSetConvolutionGroupCount"
        )
        _check(
            _fn("cudnnSetConvolutionMathType")(self.conv, FMA_MATH), "cudnnSetConvolutionMathType"
        )
        self._algos: dict[str, tuple[int, int] | None] = {}

    _KINDS = {  # kind -> (the conv call, its heuristic, descriptors' order, workspace query)
        "fwd": ("cudnnConvolutionForward", "cudnnGetConvolutionForwardAlgorithm_v7", "xwcy",
                "cudnnGetConvolutionForwardWorkspaceSize"),
        "data": ("cudnnConvolutionBackwardData", "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                 "wycx", "cudnnGetConvolutionBackwardDataWorkspaceSize"),
        "filter": ("cudnnConvolutionBackwardFilter",
                   "cudnnGetConvolutionBackwardFilterAlgorithm_v7", "xycw",
                   "cudnnGetConvolutionBackwardFilterWorkspaceSize"),
    }  # fmt: skip

    def candidates(self, kind: str) -> list[tuple[int, int]]:
        """(algorithm, workspace bytes) of cuDNN's heuristic picks for `kind`, best first,
        in strict float32 and with a workspace that fits WORKSPACE_BYTES."""
        _, heuristic, order, size_query = self._KINDS[kind]
        descs = [getattr(self, {"c": "conv"}.get(ch, ch)) for ch in order]
        results, count = (_AlgoPerf * 16)(), ctypes.c_int()
        _check(_fn(heuristic)(self.h, *descs, 16, ctypes.byref(count), results), heuristic)
        found = []
        for r in results[: count.value]:
            if r.status == 0 and r.math_type not in TENSOR_OP_MATHS:
                size = ctypes.c_size_t()
                _check(_fn(size_query)(self.h, *descs, r.algo, ctypes.byref(size)), size_query)
                if size.value <= WORKSPACE_BYTES:
                    found.append((r.algo, size.value))
        return found

    def algo(self, kind: str, operands: tuple | None = None) -> tuple[int, int] | None:
        """(algorithm, workspace bytes) for `kind`, chosen on first use and kept: the
        fastest of the candidates timed on `operands` (see `benchmark`), else cuDNN's
        first heuristic pick; None when no algorithm fits."""
        if kind not in self._algos:
            found = self.candidates(kind)
            chosen = found[0] if found else None
            if len(found) > 1 and operands is not None and benchmark():
                chosen = self._fastest(kind, found, operands)
            self._algos[kind] = chosen
        return self._algos[kind]

    def _fastest(self, kind: str, found: list[tuple[int, int]], operands: tuple):
        """The candidate that ran `operands` fastest (BENCHMARK_RUNS calls after one
        warm-up); within 5% of it, the one with the smallest workspace."""
        from netbrew.cuda import synchronize

        name = self._KINDS[kind][0]
        times = []
        for algo, size in found:
            if self._launch(name, algo, size, operands):
                continue  # cuDNN refused it on these tensors
            synchronize(self.device)
            start = time.perf_counter()
            for _ in range(BENCHMARK_RUNS):
                self._launch(name, algo, size, operands)
            synchronize(self.device)
            times.append((time.perf_counter() - start, size, algo))
        if not times:
            return found[0]
        best = min(t for t, _, _ in times)
        size, _, algo = min((s, t, a) for t, s, a in times if t <= 1.05 * best)
        return algo, size

    def _launch(self, name: str, algo: int, size: int, operands: tuple) -> int:
        from netbrew.operators.cuda.launch import empty

        work = empty((size,), np.uint8) if size else None
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        (a_desc, a), (b_desc, b), (out_desc, out) = operands
        return _fn(name)(self.h, ctypes.byref(one), a_desc, _ptr(a), b_desc, _ptr(b), self.conv,
                         algo, _ptr(work), ctypes.c_size_t(size), ctypes.byref(zero), out_desc,
                         _ptr(out))  # fmt: skip

    def _run(self, kind: str, *operands: Any) -> bool:
        found = self.algo(kind, operands)
        if found is None:
            return False
        name = self._KINDS[kind][0]
        _check(self._launch(name, *found, operands), name)
        return True

    def forward(self, x: Any, w: Any, y: Any) -> bool:
        """y = conv(x, w); False (nothing done) when no algorithm fits."""
        return self._run("fwd", (self.x, x), (self.w, w), (self.y, y))

    def backward_data(self, w: Any, dy: Any, dx: Any) -> bool:
        return self._run("data", (self.w, w), (self.y, dy), (self.x, dx))

    def backward_filter(self, x: Any, dy: Any, dw: Any) -> bool:
        return self._run("filter", (self.x, x), (self.y, dy), (self.w, dw))


def plan(device: int, x_shape, w_shape, win: Any, group: int) -> Plan | None:
    """cuDNN's plan for the conv of x (N, C, *image) by w over `win` (a Window), or None
    where netbrew's own kernels run it (see the module's docstring)."""
    nd = len(x_shape) - 2
    if x_shape[0] < MIN_BATCH or not 1 <= nd <= 3 or tuple(win.begin) != tuple(win.end):
        return None
    if not enabled():
        return None
    if not all(x_shape) or not all(w_shape) or not all(win.out):
        return None
    for size, k, s, d, p, out in zip(x_shape[2:], win.kernel, win.strides, win.dilations,
                                     win.begin, win.out):  # fmt: skip
        if (size + 2 * p - d * (k - 1) - 1) // s + 1 != out:
            return None
    x_shape, w_shape = list(x_shape), list(w_shape)
    pads, strides, dilations = list(win.begin), list(win.strides), list(win.dilations)
    y_shape = [x_shape[0], w_shape[0], *win.out]
    if nd == 1:  # cuDNN wants at least 2 spatial axes: a unit one in front
        x_shape.insert(2, 1), w_shape.insert(2, 1), y_shape.insert(2, 1)
        pads, strides, dilations = [0, *pads], [1, *strides], [1, *dilations]
    key = (device, tuple(x_shape), tuple(w_shape), tuple(pads), tuple(strides),
           tuple(dilations), group)  # fmt: skip
    found = _plans.get(key)
    if found is None:
        found = _plans[key] = Plan(device, x_shape, w_shape, y_shape, pads, strides, dilations,
                                   group)  # fmt: skip
    return found
