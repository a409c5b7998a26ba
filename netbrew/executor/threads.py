"""Thread controls: how many threads the BLAS behind NumPy uses, set from Python.

netbrew runs on two kinds of threads. BLAS (OpenBLAS, MKL, BLIS: whichever NumPy loaded)
parallelises each GEMM, which is most of a Conv's, Gemm's or MatMul's time; its default is
one thread per core, or the OPENBLAS_NUM_THREADS / MKL_NUM_THREADS / OMP_NUM_THREADS
environment variable read when NumPy loads it. The `dag` runtime runs independent ops on
`num_workers` threads (a net argument, default 2). Elementwise NumPy work is single-threaded.

The environment variables only act before NumPy loads its BLAS. `set_num_threads` changes
the count at any time, for the whole process, through threadpoolctl (which finds the BLAS
libraries loaded in the process); `num_threads` does it for a `with` block only.

    import netbrew as nb
    nb.set_num_threads(1)        # one BLAS thread from now on
    with nb.num_threads(4):      # four, inside the block
        predictor.run(feeds)

A conv on a batch of images (a training step's forward, input and weight gradients) is
split by images over the BLAS threads, each part on its own thread with BLAS held at one
thread while it runs (netbrew.operators.batch_split): its copies then use every core, and
no threaded GEMM leaves OpenBLAS's worker spinning. While a split runs, BLAS calls from
any thread of the process get one thread.

Where NumPy's BLAS is OpenBLAS and numba is on, OpenBLAS's threaded jobs run on numba's
OpenMP threads (netbrew.blas_pool): one pool of threads for GEMMs and numba kernels, which
spin briefly between them, so the numba kernels of a single image (epilogues, pools,
depthwise convs, Winograd tile placement) run parallel at far smaller sizes than when they
had to wake sleeping threads beside OpenBLAS's spinning worker, and a Winograd conv's
batch of small GEMMs, which OpenBLAS runs on one thread each, goes over the cores a product
a thread (blas_pool.batched_matmul).

Why a single image's NumPy passes (bias, Relu, copies, Winograd transforms, pools) are not
split over Python threads, as onnxruntime's intra-op pool splits its kernels: it was built
and measured (2-core VM, OpenBLAS 0.3.31, ResNet-50 at batch 1, in A/B runs alternating fresh
processes) and ran slower every way it was tried:
- BLAS held at one thread for the run, each conv split over two Python threads (1x1 convs
  by output channels, the rest by bands of output rows, bias and Relu inside each part):
  1.06-1.17x the time of BLAS's own two threads. Op by op, a 1x1 conv with its bias and
  Relu split this way took 0.83-1.5x the time; each handoff to a waiting thread costs
  25-70 us, and the Python between NumPy calls in one part waits on the other's GIL.
- BLAS left at two threads and only the Winograd convs split in bands (their small
  batched GEMMs run on one thread inside OpenBLAS): those ops took 1.08-1.17x as long,
  the model 1.055x. OpenBLAS's idle worker busy-waits for a while after each threaded
  call, on the core a helper thread needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np  # noqa: F401  (loads the BLAS that threadpoolctl then finds)
from threadpoolctl import threadpool_info, threadpool_limits

from netbrew import blas_pool


def _check(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the BLAS thread count must be an integer >= 1, got {n!r}")
    return n


def _blas() -> list[dict]:
    found = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    if not found:
        raise RuntimeError(
            "no BLAS library that threadpoolctl can control is loaded with NumPy; "
            "set OPENBLAS_NUM_THREADS or MKL_NUM_THREADS before starting Python instead"
        )
    return found


def get_num_threads() -> int:
    """The number of threads the BLAS behind NumPy uses (the largest, if NumPy loaded
    several BLAS libraries)."""
    return max(int(lib["num_threads"]) for lib in _blas())


def set_num_threads(n: int) -> None:
    """Sets the number of threads of the BLAS behind NumPy, for the whole process, from now
    on: at most numba's thread count (NUMBA_NUM_THREADS, one per core by default) while
    OpenBLAS's jobs run on numba's threads (netbrew.blas_pool).

    Raises:
        ValueError: n is not an integer >= 1.
        RuntimeError: no BLAS library that can be controlled is loaded.
    """
    _check(n)
    _blas()
    threadpool_limits(limits=_capped(n), user_api="blas")


@contextlib.contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Within the `with` block, the BLAS behind NumPy uses `n` threads; afterwards the
    previous count is back."""
    _check(n)
    _blas()
    with threadpool_limits(limits=_capped(n), user_api="blas"):
        yield


def _capped(n: int) -> int:
    """n, or numba's thread count where it is less and OpenBLAS's jobs run on numba's
    threads (netbrew.blas_pool): the jobs of one call wait on each other, so each needs a
    thread of its own."""
    most = blas_pool.max_threads()
    return n if most is None else min(n, most)
