"""BLAS thread controls: set_num_threads, get_num_threads, num_threads and bench --threads."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import netbrew as nb
from netbrew.cli import main
from netbrew.executor import threads


def blas_counts() -> list[int]:
    """What the BLAS libraries themselves report, read independently of netbrew."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture(autouse=True)
def restore_threads():
    before = nb.get_num_threads()
    yield
    nb.set_num_threads(before)


def test_set_and_get():
    nb.set_num_threads(1)
    assert nb.get_num_threads() == 1 and set(blas_counts()) == {1}
    nb.set_num_threads(2)
    assert nb.get_num_threads() == 2 and set(blas_counts()) == {2}


def test_num_threads_is_scoped_and_results_do_not_change():
    nb.set_num_threads(2)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(64, 300)), rng.normal(size=(300, 80))
    want = a @ b
    with nb.num_threads(1):
        assert set(blas_counts()) == {1}
        got = a @ b
    assert set(blas_counts()) == {2}
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_bad_counts_are_refused(bad):
    with pytest.raises(ValueError, match="integer >= 1"):
        nb.set_num_threads(bad)
    with pytest.raises(ValueError, match="integer >= 1"):
        with nb.num_threads(bad):
            pass


def test_no_controllable_blas_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(threads, "threadpool_info", lambda: [])
    with pytest.raises(RuntimeError, match="set OPENBLAS_NUM_THREADS or MKL_NUM_THREADS"):
        nb.get_num_threads()
    with pytest.raises(RuntimeError, match="no BLAS library"):
        nb.set_num_threads(1)


def test_bench_threads_applies_while_it_runs(model_dir, capsys):
    args = ["bench", str(model_dir), "--input", "data=2x1x6x6", "--iters", "1"]
    nb.set_num_threads(2)
    assert main([*args, "--threads", "1"]) == 0
    assert "BLAS threads 1" in capsys.readouterr().out
    assert nb.get_num_threads() == 2  # back after the command
    assert main(args) == 0
    assert "BLAS threads 2" in capsys.readouterr().out
    assert main([*args, "--threads", "0"]) == 1
    assert "--threads must be at least 1, got 0" in capsys.readouterr().err
