"""Every test here runs CUDA kernels: marked `cuda`, skipped cleanly without a GPU."""

import pytest

from netbrew import cuda


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    skip = pytest.mark.skip(reason="no CUDA GPU (pycuda, a driver and a device are needed)")
    available = cuda.is_available()
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.cuda)
            if not available:
                item.add_marker(skip)
