"""CopyCPUToGPU and CopyGPUToCPU on the CPU device (host copies) and their gradients; the
GPU transfers are tested in tests/cuda, the placement that inserts them in
tests/executor/test_placement.py."""

import numpy as np
import pytest

from netbrew.netdef import op_def
from netbrew.operators import GRADIENTS
from netbrew.testing import check_op


@pytest.mark.parametrize("op", ["CopyCPUToGPU", "CopyGPUToCPU"])
@pytest.mark.parametrize("x", [np.arange(3, dtype=np.float32), np.array([[True]])])
def test_a_copy_on_the_cpu_device_stays_in_host_memory(op, x):
    check_op(op, [x], reference=lambda a: (a,))


def test_each_copys_gradient_is_the_other_copy():
    there = op_def("CopyCPUToGPU", ["x"], ["x_gpu"], device="cuda:1")
    (back,) = GRADIENTS["CopyCPUToGPU"](there, ["dy"], ["dx"])
    assert back.type == "CopyGPUToCPU" and back.device_option.device_id == 1
    (again,) = GRADIENTS["CopyGPUToCPU"](back, ["dz"], ["dw"])
    assert again.type == "CopyCPUToGPU"
