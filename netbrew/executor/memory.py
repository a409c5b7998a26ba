"""Keeping freed activation memory in the process instead of handing it back to the OS.

A net run allocates a fresh array for most op outputs. glibc's malloc serves large blocks
(128 KiB and up, adjusting dynamically) with mmap and returns them to the OS on free, so the
next run page-faults every page in again: on ResNet-50 at batch 1 that made the residual
Sum and Relu ops ~4x slower than their arithmetic. `retain_freed_memory` raises the mmap
and trim thresholds once per process, so freed blocks stay in malloc's heap and are reused
warm, the way onnxruntime's arena keeps its buffers. Peak RSS is unchanged (the same blocks
are live at the peak); memory above the peak is never taken.

It is applied when the first net is created. Set NETBREW_RETAIN_MEMORY=0 to leave malloc
alone. Not glibc (macOS, musl, Windows): nothing happens.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

# mallopt parameter numbers from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
# glibc caps the mmap threshold at 32 MiB on 64-bit (HEAP_MAX_SIZE / 2); larger blocks
# are still mapped per allocation.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 16 << 20

_lock = threading.Lock()
_state: dict[str, bool] = {}


def retain_freed_memory() -> bool:
    """Tunes glibc malloc once per process (see the module docstring).

    Returns:
        Whether the tuning is in effect.
    """
    with _lock:
        if "applied" not in _state:
            _state["applied"] = _apply()
        return _state["applied"]


def _apply() -> bool:
    if os.environ.get("NETBREW_RETAIN_MEMORY", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    settings = (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (_M_TOP_PAD, TOP_PAD),
    )
    return all(mallopt(param, value) == 1 for param, value in settings)
