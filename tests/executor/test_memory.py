"""retain_freed_memory: glibc malloc keeps freed activation blocks instead of unmapping them."""

import os
import subprocess
import sys

import pytest

from netbrew.executor.memory import retain_freed_memory

glibc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.confstr("CS_GNU_LIBC_VERSION") is None,
    reason="malloc tuning applies to glibc only",
)

_PROBE = """
import resource
import numpy as np
from netbrew.executor import Workspace
from netbrew.executor.memory import retain_freed_memory
from netbrew.netdef import Net

net = Net("chain")  # 6 MiB activations: mmapped per allocation by default glibc
x = "x"
for i in range(6):
    net.Relu([x], [f"r{i}"])
    x = net.Add([f"r{i}", x], [f"a{i}"])
ws = Workspace()
ws.feed_blob("x", np.ones((1, 128, 112, 112), np.float32))
ws.create_net(net)
ws.run_net("chain")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
ws.run_net("chain", num_iter=10)
print(retain_freed_memory(), (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 10)
"""


def _probe(env_value: str) -> tuple[str, int]:
    """(whether tuning applied, minor page faults per run of a Relu/Add chain)."""
    env = {**os.environ, "NETBREW_RETAIN_MEMORY": env_value}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@glibc
def test_freed_blocks_are_reused_without_page_faults():
    applied, faults = _probe("1")
    assert applied == "True"
    # each 6 MiB output is 1,568 pages; the 12 outputs of a run reuse warm heap blocks
    assert faults < 300, faults


@glibc
def test_opt_out_leaves_malloc_alone():
    applied, faults = _probe("0")
    assert applied == "False"
    assert faults > 600, faults  # fresh pages for the outputs of every run


def test_retain_is_idempotent():
    assert retain_freed_memory() == retain_freed_memory()
