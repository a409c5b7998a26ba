"""CUDA C sources of the op families (netbrew/operators/cuda/*.cu), compiled once per
process and device by PyCUDA's SourceModule (which also caches the binaries on disk).

Each .cu file holds `extern "C" __global__` kernels, one family per file next to its
Python launch code. `nvcc_ptx` compiles a file without a GPU, as CI does.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from netbrew.cuda import DeviceError, activate

KERNEL_DIR = Path(__file__).resolve().parents[1] / "operators" / "cuda"
OPTIONS = ["-O3", "--use_fast_math", "-std=c++17"]
ARCHES = ("sm_80", "sm_90")  # what CI compiles every file for

_modules: dict[tuple[str, int], Any] = {}
_functions: dict[tuple[str, str, int], Any] = {}
_lock = threading.Lock()


def cu_files() -> list[Path]:
    """Every family's .cu file."""
    return sorted(KERNEL_DIR.glob("*.cu"))


def source(family: str) -> str:
    path = KERNEL_DIR / f"{family}.cu"
    if not path.exists():
        raise DeviceError(f"no CUDA source {path.name} for op family {family!r}")
    return path.read_text()


def function(family: str, name: str, device: int = 0) -> Any:
    """Kernel `name` of `family`.cu, compiled for `device` on first use (looked up once)."""
    activate(device)
    found = _functions.get((family, name, device))
    if found is not None:
        return found
    key = (family, device)
    with _lock:
        module = _modules.get(key)
        if module is None:
            from pycuda.compiler import SourceModule

            module = _modules[key] = SourceModule(
                source(family), no_extern_c=True, options=OPTIONS, include_dirs=[str(KERNEL_DIR)]
            )
    found = _functions[(family, name, device)] = module.get_function(name)
    return found


def nvcc() -> str | None:
    return shutil.which("nvcc")


def nvcc_ptx(path: Path, arch: str, out: Path) -> subprocess.CompletedProcess:
    """Compiles one .cu file to PTX for `arch` (sm_80, sm_90) with nvcc; no GPU needed."""
    command = [nvcc() or "nvcc", "-ptx", f"-arch={arch}", *OPTIONS, f"-I{KERNEL_DIR}",
               str(path), "-o", str(out)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300)
