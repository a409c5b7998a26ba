"""Real 2-rank jobs on localhost: mpiexec as a subprocess, each bounded in time."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py")
from netbrew.distributed.launch import find_mpiexec  # noqa: E402

JOB = Path(__file__).with_name("mpi_job.py")
REPO = Path(__file__).resolve().parents[2]

try:
    MPIEXEC = find_mpiexec()
except Exception:  # no MPI on this machine
    MPIEXEC = None
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (netbrew[distributed])")


def job(mode: str, out: Path, ranks: int = 2, timeout: float = 120):
    """Runs mpi_job.py MODE on `ranks` ranks; returns (exit code, output, seconds)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [MPIEXEC, "-n", str(ranks), sys.executable, str(JOB), mode, str(out)]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - start


def params(out: Path, rank: int, size: int) -> dict[str, np.ndarray]:
    return dict(np.load(out / f"params_rank{rank}_of{size}.npz"))


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    """20 SGD steps of the demo's CNN on 1 rank, batch 64 (in a process of its own)."""
    out = tmp_path_factory.mktemp("one")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(JOB), "exact", str(out)], check=True, env=env,
                   timeout=120)  # fmt: skip
    return params(out, 0, 1)


def assert_same_training(two: dict, one: dict) -> None:
    assert two.keys() == one.keys()
    for name, value in one.items():
        np.testing.assert_allclose(two[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("mode", ["exact", "dag"])
def test_two_ranks_of_32_train_as_one_rank_of_64(mode, one_rank, tmp_path):
    code, output, _ = job(mode, tmp_path)
    assert code == 0, output
    rank0, rank1 = params(tmp_path, 0, 2), params(tmp_path, 1, 2)
    for name in rank0:  # the ranks hold bit-identical parameters
        assert np.array_equal(rank0[name], rank1[name]), name
    assert_same_training(rank0, one_rank)


def test_both_ranks_resume_from_rank_0s_checkpoint(one_rank, tmp_path):
    code, output, _ = job("checkpoint", tmp_path)
    assert code == 0, output
    assert (tmp_path / "checkpoint.pb").exists()
    assert_same_training(params(tmp_path, 0, 2), one_rank)
    assert_same_training(params(tmp_path, 1, 2), one_rank)


def test_a_checkpoint_holds_the_ranks_average_running_statistics(tmp_path):
    from netbrew.netdef.serialize import load_blobs

    code, output, _ = job("batchnorm", tmp_path)
    assert code == 0, output
    ranks = [dict(np.load(tmp_path / f"stats_rank{r}.npz")) for r in (0, 1)]
    saved = load_blobs(tmp_path / "checkpoint.pb")
    assert set(ranks[0]) == {"bn_rm", "bn_rv"}
    assert not np.allclose(ranks[0]["bn_rm"], ranks[1]["bn_rm"])  # they saw other data
    for name in ranks[0]:
        np.testing.assert_allclose(saved[name], (ranks[0][name] + ranks[1][name]) / 2, rtol=1e-6)


def test_a_rank_that_raises_ends_the_job_with_its_error_once(tmp_path):
    code, output, seconds = job("raise", tmp_path)
    assert code != 0 and seconds < 30
    assert output.count("ValueError: rank 1 fails on purpose") == 1
    assert "[rank 1] Traceback" in output


def test_ranks_that_disagree_fail_at_the_first_collective_naming_the_blob(tmp_path):
    code, output, seconds = job("mismatch", tmp_path)
    assert code != 0 and seconds < 30
    assert "the ranks disagree on tensor #0" in output
    assert "has grad_w float32[3]" in output and "has grad_w float32[4]" in output


def test_a_collective_whose_peer_never_comes_times_out(tmp_path):
    code, output, seconds = job("timeout", tmp_path)
    assert code != 0 and seconds < 20
    assert "rank 0 waited 2 s for its peers" in output


def test_demo_with_two_workers(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "netbrew.cli", "demo", "--workers", "2", "-o", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert sum(li.startswith("held-out accuracy") for li in lines) == 1  # rank 0 reports
    accuracy = float(next(li for li in lines if li.startswith("held-out")).split()[2][:-1])
    assert accuracy >= 97.0, done.stdout
    assert "data-parallel over 2 ranks, batch 32 each" in done.stdout
    assert (tmp_path / "predict_net.pb").exists()
