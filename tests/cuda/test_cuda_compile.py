"""Every .cu file compiles with nvcc to PTX for sm_80 and sm_90, without a GPU (as CI)."""

import pytest

from netbrew.cuda.compile import ARCHES, cu_files, nvcc, nvcc_ptx

FILES = cu_files()


def test_there_are_kernel_sources():
    assert FILES, "no .cu files under netbrew/operators/cuda"


@pytest.mark.skipif(nvcc() is None, reason="nvcc not found")
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_cu_file_compiles(path, arch, tmp_path):
    done = nvcc_ptx(path, arch, tmp_path / f"{path.stem}.ptx")
    assert done.returncode == 0, f"{path.name} for {arch}:\n{done.stderr}"
    assert ".entry" in (tmp_path / f"{path.stem}.ptx").read_text()


def test_every_kernel_a_module_launches_is_in_its_source():
    """Launch code names kernels by string: each name must exist in the family's .cu."""

    from netbrew.cuda.compile import KERNEL_DIR

    for path in FILES:
        launcher = KERNEL_DIR / f"{path.stem}.py"
        assert launcher.exists(), f"{path.name} has no launch module {launcher.name}"
