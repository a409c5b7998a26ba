"""Builds a PyCUDA wheel from its sdist with every C++ file compiled in parallel.

setuptools compiles an extension's sources one after another; PyCUDA's are some forty
Boost.Python and wrapper files, minutes on one core. tools/gpu_env.sh runs this on a GPU
machine that has the CUDA toolkit but no network:

    python3 tools/build_pycuda.py pycuda-2026.1.tar.gz WHEEL_DIR
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def parallel_compile(
    self, sources, output_dir=None, macros=None, include_dirs=None, debug=False,
    extra_preargs=None, extra_postargs=None, depends=None,
):  # fmt: skip
    """distutils' CCompiler.compile with the per-file compiles run on a thread pool."""
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs
    )
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)

    def one(obj: str) -> None:
        src, ext = build[obj]
        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)

    with ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(one, [obj for obj in objects if obj in build]))
    return objects


def libcuda_dir(scratch: str) -> str | None:
    """A folder with libcuda.so to link against: the toolkit's stub, or else a link to the
    driver's libcuda.so.1 (driver installs often lack the unversioned name)."""
    root = os.environ.get("CUDA_ROOT", "/usr/local/cuda")
    folders = [f"{root}/lib64/stubs", f"{root}/lib/stubs", f"{root}/lib64", f"{root}/lib",
               "/usr/lib/x86_64-linux-gnu", "/usr/local/nvidia/lib64", "/usr/lib64"]  # fmt: skip
    for folder in folders:
        if Path(folder, "libcuda.so").exists():
            return folder
    for folder in folders:
        if Path(folder, "libcuda.so.1").exists():
            link = Path(scratch, "libcuda")
            link.mkdir(exist_ok=True)
            (link / "libcuda.so").symlink_to(Path(folder, "libcuda.so.1"))
            return str(link)
    return None


def main(sdist: str, wheel_dir: str) -> None:
    import setuptools  # noqa: F401  (its distutils is the one setup.py uses)
    from setuptools._distutils import ccompiler

    ccompiler.CCompiler.compile = parallel_compile
    wheel_dir = str(Path(wheel_dir).resolve())
    work = tempfile.mkdtemp(prefix="pycuda-build-")
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    (root,) = Path(work).iterdir()
    os.chdir(root)
    sys.path.insert(0, str(root))
    # setup.py reads its paths from siteconf.py; netbrew needs no cuRAND
    configure = [sys.executable, "configure.py", "--no-cuda-enable-curand"]
    if os.environ.get("CUDA_ROOT"):
        configure.append(f"--cuda-root={os.environ['CUDA_ROOT']}")
    driver_dir = libcuda_dir(work)
    if driver_dir:
        configure.append(f"--cudadrv-lib-dir={driver_dir}")
    subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
    sys.argv = ["setup.py", "--quiet", "bdist_wheel", "--dist-dir", wheel_dir]
    runpy.run_path("setup.py", run_name="__main__")


if __name__ == "__main__":
    main(*sys.argv[1:])
