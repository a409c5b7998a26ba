"""`netbrew launch -n N script.py [args]`: run a script on N ranks under mpiexec.

The mpiexec is the one the `mpich` wheel installs beside this Python (the
`[distributed]` extra), else the first on PATH. MPI ends the whole job when a rank
aborts, and netbrew's ranks abort on an uncaught exception (world.init), so a failing
rank never leaves the others waiting.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from netbrew.errors import NetbrewError


def find_mpiexec() -> str:
    """The mpiexec to run ranks with; the error says how to get one."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if found:
        return found
    raise NetbrewError(
        'no mpiexec found: pip install "netbrew[distributed]" (mpi4py and the mpich wheel) '
        "or install an MPI"
    )


def launch(
    n: int, argv: Sequence[str], *, timeout: float | None = None, env: dict | None = None
) -> int:
    """Runs `python argv...` on `n` ranks; returns the job's exit code (non-zero when any
    rank failed). `timeout` (seconds) ends the whole job when it runs longer."""
    if n < 1:
        raise ValueError(f"launch: -n {n}; need at least one rank")
    command = [find_mpiexec(), "-n", str(n), sys.executable, *argv]
    environment = {**os.environ, **(env or {})}
    # One BLAS thread per rank unless told otherwise: ranks share the machine's cores.
    environment.setdefault("OPENBLAS_NUM_THREADS", "1")
    environment.setdefault("MKL_NUM_THREADS", "1")
    try:
        return subprocess.run(command, env=environment, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        sys.stderr.write(f"netbrew launch: the job ran past {timeout:g} s and was stopped\n")
        return 124
