"""netbrew.blas_pool: OpenBLAS's threaded jobs on numba's OpenMP threads give the same
numbers as OpenBLAS's own threads, from several Python threads at once, and step aside in
forked children, when uninstalled, and when NETBREW_BLAS_POOL=0."""

import ctypes
import multiprocessing
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from netbrew import blas_pool, jit

pytestmark = pytest.mark.skipif(
    not (jit.enabled() and blas_pool.wanted() and blas_pool.supported()),
    reason="needs numba and a pthreads OpenBLAS with the threads callback",
)


@pytest.fixture(autouse=True)
def _pool():
    jit._start_pool()  # what the first kernel call does
    assert blas_pool.installed()
    yield
    blas_pool.install()


def _callback_address() -> int | None:
    """The callback OpenBLAS holds now, read from its exported global."""
    controller, _ = blas_pool._openblas()[0]
    return ctypes.c_void_p.in_dll(controller.dynlib, "openblas_threads_callback_").value


def _products(rng, dtype):
    """Threaded GEMMs (big enough that OpenBLAS splits them), transposed operands, a
    batched matmul and a GEMV, each with its float64 product."""
    cases = []
    for m, k, n in [(512, 256, 384), (300, 700, 257), (1, 2048, 1000), (1024, 64, 49)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        cases.append((a, b))
        cases.append((np.asfortranarray(a), b.T.copy().T))
    a = rng.standard_normal((16, 49, 256)).astype(dtype)
    b = rng.standard_normal((16, 256, 256)).astype(dtype)
    cases.append((a, b))
    cases.append(
        (rng.standard_normal((2000, 1500)).astype(dtype), rng.standard_normal(1500).astype(dtype))
    )
    return [(a, b, np.matmul(a.astype(np.float64), b.astype(np.float64))) for a, b in cases]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_through_the_pool_match_float64(dtype):
    assert _callback_address() == blas_pool._state["callback"].address
    for a, b, want in _products(np.random.default_rng(0), dtype):
        got = np.matmul(a, b)
        tol = 2e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_threads_are_capped_at_numbas():
    import numba

    controller, _ = blas_pool._openblas()[0]
    assert controller.get_num_threads() <= numba.config.NUMBA_NUM_THREADS
    assert blas_pool.max_threads() == numba.config.NUMBA_NUM_THREADS


def test_several_python_threads_at_once():
    """A dag net's workers call BLAS at the same time: every call gets its own team and
    the right product (a deadlock fails the test by its timeout)."""
    rng = np.random.default_rng(1)
    pairs = [
        (
            rng.standard_normal((384, 512), dtype=np.float32),
            rng.standard_normal((512, 320), dtype=np.float32),
        )
        for _ in range(8)
    ]
    want = [a.astype(np.float64) @ b for a, b in pairs]

    def work(i):
        a, b = pairs[i % len(pairs)]
        for _ in range(5):
            got = a @ b
        return i, got

    with ThreadPoolExecutor(4) as pool:
        for i, got in pool.map(work, range(16), timeout=120):
            np.testing.assert_allclose(got, want[i % len(pairs)], rtol=2e-4, atol=2e-3)


def test_uninstall_gives_openblas_its_threads_back():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((512, 512), dtype=np.float32)
    with_pool = a @ a
    blas_pool.uninstall()
    assert not blas_pool.installed() and not _callback_address()
    np.testing.assert_allclose(a @ a, with_pool, rtol=1e-5, atol=1e-4)
    assert blas_pool.install() and _callback_address()


def _child_product(queue):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((600, 600), dtype=np.float32)
    held = _callback_address()
    queue.put((held, float(np.abs(a @ a - a.astype(np.float64) @ a).max())))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_forked_child_runs_on_openblas_threads():
    """GNU OpenMP cannot run in a child forked after its team ran: the child's BLAS goes
    back to OpenBLAS's own threads, and a threaded GEMM there finishes correctly."""
    np.ones((512, 512), np.float32) @ np.ones((512, 512), np.float32)  # the team has run
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_product, args=(queue,))
    child.start()
    held, error = queue.get(timeout=120)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert not held and error < 1e-2


def test_environment_switch_and_openmp_wait():
    code = (
        "import os, numpy as np, netbrew\n"
        "from netbrew import blas_pool, jit\n"
        "jit._start_pool()\n"
        "print(blas_pool.installed(), os.environ.get('OMP_WAIT_POLICY'),"
        " os.environ.get('GOMP_SPINCOUNT'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    off = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "NETBREW_BLAS_POOL": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert off.stdout.split() == ["False", "PASSIVE", "None"]
    on = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert on.stdout.split() == ["True", "None", "10000"]


def test_set_num_threads_stays_within_numbas_threads():
    import numba

    import netbrew as nb

    before = nb.get_num_threads()
    most = numba.config.NUMBA_NUM_THREADS
    try:
        nb.set_num_threads(most + 3)
        assert nb.get_num_threads() == most
        with nb.num_threads(most + 5):
            assert nb.get_num_threads() == most
            rng = np.random.default_rng(4)
            a = rng.standard_normal((700, 500), dtype=np.float32)
            np.testing.assert_allclose(a @ a.T, a.astype(np.float64) @ a.T, rtol=2e-4, atol=2e-3)
        nb.set_num_threads(1)
        assert nb.get_num_threads() == 1
    finally:
        nb.set_num_threads(before)
