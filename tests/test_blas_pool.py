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

    def run(**extra):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, **extra},
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.split()

    assert run(NETBREW_BLAS_POOL="0") == ["False", "PASSIVE", "None"]
    assert run() == ["True", "None", "10000"]
    assert run(OMP_DYNAMIC="true")[0] == "False"  # a dynamic team may lack a thread a job needs


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


def _layouts(rng):
    """(a, b, out) stacks in the layouts netbrew's ops hand over: plain, a transposed B
    (attention's K^T), a 2-D A broadcast over the batch (a conv's weights), a 4-D batch,
    an output whose matrices are strided rows of a bigger array (a shuffled grouped conv),
    and products big enough that OpenBLAS would thread each."""
    f = np.float32
    cases = []
    a, b = rng.standard_normal((36, 196, 64), dtype=f), rng.standard_normal((36, 64, 64), dtype=f)
    cases.append((a, b, np.empty((36, 196, 64), f)))
    k = rng.standard_normal((12, 128, 64), dtype=f)
    cases.append(
        (
            rng.standard_normal((12, 128, 64), dtype=f),
            k.transpose(0, 2, 1),
            np.empty((12, 128, 128), f),
        )
    )
    w = rng.standard_normal((3, 80, 240), dtype=f)
    cols = rng.standard_normal((2, 3, 240, 196), dtype=f)
    cases.append((w, cols[1:], np.empty((1, 3, 80, 196), f)))
    shuffled = np.empty((1, 80, 3, 196), f)
    cases.append((w, cols[:1], shuffled.transpose(0, 2, 1, 3)))
    cases.append(
        (
            rng.standard_normal((4, 256, 256), dtype=f),
            rng.standard_normal((4, 256, 256), dtype=f),
            np.empty((4, 256, 256), f),
        )
    )
    return cases


def test_batched_matmul_spreads_stacks_in_every_layout_ops_use():
    import netbrew as nb

    threads = nb.get_num_threads()
    for a, b, out in _layouts(np.random.default_rng(5)):
        out[...] = np.nan
        assert blas_pool.batched_matmul(a, b, out), (a.shape, b.shape, out.shape)
        want = np.matmul(a.astype(np.float64), b)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        assert nb.get_num_threads() == threads  # BLAS has its threads back


def test_batched_matmul_declines_what_it_does_not_pay_for_or_take():
    rng = np.random.default_rng(6)

    def case(items, m, k, n, dtype=np.float32):
        a = rng.standard_normal((items, m, k)).astype(dtype)
        b = rng.standard_normal((items, k, n)).astype(dtype)
        return a, b, np.zeros((items, m, n), dtype)

    a, b, _ = case(36, 196, 64, 64)
    declined = [
        case(3, 5, 7, 9),  # too little work
        case(1, 512, 512, 512),  # one product: OpenBLAS threads it
        case(36, 196, 64, 64, np.float64),
        (a, b, np.zeros((36, 64, 196), np.float32).transpose(0, 2, 1)),  # column-major out
        (a[:, :, ::2], b[:, ::2], np.zeros((36, 196, 64), np.float32)),  # no unit stride
        (a, b, a[:, :, :64]),  # out overlaps a
        (  # weights shared by 2 images of 3 groups: batch strides (0, s) do not collapse
            rng.standard_normal((3, 80, 240)).astype(np.float32),
            rng.standard_normal((2, 3, 240, 196)).astype(np.float32),
            np.zeros((2, 3, 80, 196), np.float32),
        ),
    ]
    for x, y, out in declined:
        before = out.copy()
        assert not blas_pool.batched_matmul(x, y, out)
        np.testing.assert_array_equal(out, before)
    out = np.zeros((36, 98, 64), np.float32)  # every other row of a: rows 2 apart, fine
    assert blas_pool.batched_matmul(a[:, ::2], b, out)
    np.testing.assert_allclose(out, np.matmul(a[:, ::2], b), rtol=1e-4, atol=1e-3)


def test_winograd_conv_spreads_its_products_and_matches_direct(monkeypatch):
    """ResNet-50's 56x56 F(4x4) conv goes through batched_matmul, with the same result."""
    from netbrew.operators import conv
    from netbrew.operators.conv_winograd4 import winograd4_correlate, winograd4_weights

    calls = []
    real = blas_pool.batched_matmul
    monkeypatch.setattr(blas_pool, "batched_matmul", lambda *a: calls.append(real(*a)) or calls[-1])
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 64, 56, 56), dtype=np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    y = winograd4_correlate(x, winograd4_weights(w), (1, 1, 1, 1))
    (want,) = conv.conv_cpu(x.astype(np.float64), w.astype(np.float64), None, pads=[1, 1, 1, 1])
    assert any(calls)  # the last strip of tile rows may be too small to spread
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_batched_matmul_leaves_a_split_batchs_parts_alone(monkeypatch):
    """Inside one part of a batch split over the cores (a training conv), the other cores
    run the other parts: no parallel region of its own."""
    from netbrew.operators import batch_split

    rng = np.random.default_rng(8)
    a = rng.standard_normal((36, 196, 64), dtype=np.float32)
    b = rng.standard_normal((36, 64, 64), dtype=np.float32)
    out = np.zeros((36, 196, 64), np.float32)
    monkeypatch.setattr(batch_split._local, "inside", True, raising=False)
    assert not blas_pool.batched_matmul(a, b, out)
    assert not out.any()


def test_a_thread_with_fewer_numba_threads_still_gets_a_team_for_the_jobs():
    """numba.set_num_threads(1) on the calling thread must not leave OpenBLAS's two jobs
    to run one after the other (each waits on the other): the region gets a team of the
    job count, and the thread keeps its count. A subprocess, so a hang fails by timeout."""
    code = (
        "import numba, numpy as np, netbrew\n"
        "from netbrew import blas_pool, jit\n"
        "jit._start_pool()\n"
        "assert blas_pool.installed()\n"
        "numba.set_num_threads(1)\n"
        "a = np.random.default_rng(0).standard_normal((600, 600)).astype(np.float32)\n"
        "err = np.abs(a @ a - a.astype(np.float64) @ a).max()\n"
        "print(err < 1e-2, numba.get_num_threads())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["True", "1"]


def test_openblas_raised_past_numbas_threads_still_runs_its_jobs():
    """OpenBLAS given more threads than numba has, through threadpoolctl directly: each
    threaded call's region gets a team of its job count (more threads than numba's), so
    its jobs, which wait on each other, all run. A subprocess, so a hang fails by timeout."""
    code = (
        "import numpy as np, netbrew\n"
        "from threadpoolctl import ThreadpoolController\n"
        "from netbrew import blas_pool, jit\n"
        "jit._start_pool()\n"
        "assert blas_pool.installed()\n"
        "for lib in ThreadpoolController().lib_controllers:\n"
        "    if lib.internal_api == 'openblas':\n"
        "        lib.set_num_threads(4)\n"
        "a = np.random.default_rng(0).standard_normal((700, 600)).astype(np.float32)\n"
        "err = np.abs(a @ a.T - a.astype(np.float64) @ a.T).max()\n"
        "print(err < 1e-2)\n"
    )
    env = dict(os.environ, NUMBA_NUM_THREADS="2")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
        env=env,
    )  # fmt: skip
    assert done.stdout.split() == ["True"]
