"""netbrew.cuda.cublas without a GPU: where the library is looked for and in which order,
the DeviceError naming what to install, and the row-major to column-major argument
mapping (checked on host memory against a column-major reference BLAS)."""

import ctypes
import types

import numpy as np
import pytest

from netbrew.cuda import DeviceError, cublas

TOOLKIT_ROOTS = cublas.toolkit_roots  # before the fixture replaces it


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    cublas.reset()
    monkeypatch.setattr(cublas, "_find_spec", lambda name: None)
    monkeypatch.setattr(cublas, "_find_library", lambda name: None)
    monkeypatch.setattr(cublas, "toolkit_roots", lambda: [])
    yield
    cublas.reset()


def _wheels(tmp_path, monkeypatch):
    """Fake nvidia-cublas-cu12 and CUDA 13 nvidia-cublas installs; returns their files."""
    files = {
        "nvidia.cublas": ["libcublas.so.12.4.5.8", "libcublas.so.12", "libcublasLt.so.12"],
        "nvidia.cu13": ["libcublas.so.13"],
    }
    roots = {}
    for package, names in files.items():
        root = tmp_path / package.replace(".", "_")
        (root / "lib").mkdir(parents=True)
        for name in names:
            (root / "lib" / name).write_text("")
        roots[package] = types.SimpleNamespace(submodule_search_locations=[str(root)])
    monkeypatch.setattr(cublas, "_find_spec", roots.get)
    return {p: str(tmp_path / p.replace(".", "_") / "lib") for p in files}


def test_search_order(tmp_path, monkeypatch):
    lib = _wheels(tmp_path, monkeypatch)
    monkeypatch.setattr(cublas, "_find_library", lambda name: "libcublas.so.12")
    toolkit = tmp_path / "cuda"
    for sub in ("lib64", "targets/x86_64-linux/lib"):
        (toolkit / sub).mkdir(parents=True)
        (toolkit / sub / "libcublas.so.13").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_ROOT", raising=False)
    monkeypatch.setattr(cublas, "toolkit_roots", TOOLKIT_ROOTS)
    roots = cublas.toolkit_roots()
    assert roots == [str(toolkit), "/usr/local/cuda"]
    monkeypatch.setattr(cublas, "toolkit_roots", lambda: roots[:1])
    assert cublas.candidates() == [
        f"{lib['nvidia.cublas']}/libcublas.so.12",  # the soname before the full version
        f"{lib['nvidia.cublas']}/libcublas.so.12.4.5.8",
        f"{lib['nvidia.cu13']}/libcublas.so.13",
        "libcublas.so.12",  # the linker's find, once
        f"{toolkit}/lib64/libcublas.so.13",
        f"{toolkit}/targets/x86_64-linux/lib/libcublas.so.13",
        "libcublas.so.13",
        "libcublas.so",
    ]


def test_without_wheels_the_system_library_comes_first(monkeypatch):
    def missing(name):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(cublas, "_find_spec", missing)
    monkeypatch.setattr(cublas, "_find_library", lambda name: "/usr/lib/libcublas.so.13")
    assert cublas.candidates() == ["/usr/lib/libcublas.so.13", *cublas.NAMES]


def _function(method):
    """A plain function (ctypes functions take argtypes; bound methods take no attributes)."""
    return lambda *args: method(*args)


class FakeLib:
    """Records calls; cublasCreate_v2 hands out a handle (or fails with `create_status`)."""

    def __init__(self, create_status=0):
        self.calls = []
        self.create_status = create_status
        for name in ("cublasSgemm_v2", "cublasSgemmStridedBatched", "cublasGemmEx",
                     "cublasGemmStridedBatchedEx"):  # fmt: skip
            setattr(self, name, self._recorder(name))
        self.cublasCreate_v2 = _function(self._create)

    def _recorder(self, name):
        def call(*args):
            self.calls.append((name, args))
            return 0

        return call

    def _create(self, handle):
        handle._obj.value = 42
        return self.create_status


def test_load_takes_the_first_that_opens(tmp_path, monkeypatch):
    lib = _wheels(tmp_path, monkeypatch)
    tried, fake = [], FakeLib()

    def cdll(path):
        tried.append(path)
        if path.endswith(".so.12") or path.endswith(".12.4.5.8"):
            raise OSError(f"{path}: cannot open shared object file")
        return fake

    monkeypatch.setattr(cublas, "_cdll", cdll)
    assert cublas.load() is fake and cublas.available()
    assert tried[-1] == f"{lib['nvidia.cu13']}/libcublas.so.13"
    assert fake.cublasSgemm_v2.argtypes[6] is ctypes.c_void_p  # prototypes set
    assert cublas.load() is fake and len(tried) == 3  # loaded once


def test_a_library_without_the_symbols_is_passed_over(monkeypatch):
    fake = FakeLib()
    monkeypatch.setattr(cublas, "_cdll", lambda p: object() if p.endswith(".12") else fake)
    assert cublas.load() is fake


def test_missing_library_names_what_to_install(monkeypatch):
    tried = []

    def cdll(path):
        tried.append(path)
        raise OSError(f"{path}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(cublas, "_cdll", cdll)
    with pytest.raises(DeviceError) as info:
        cublas.load()
    message = str(info.value)
    assert "cuBLAS could not be loaded" in message
    assert "libcublas.so.12 (libcublas.so.12: cannot open" in message
    assert "pip install nvidia-cublas-cu12" in message and "nvidia-cublas (CUDA 13)" in message
    assert not cublas.available()
    assert tried == list(cublas.NAMES)  # looked for once; the failure is kept


def test_handle_failure_is_a_device_error(monkeypatch):
    monkeypatch.setattr(cublas, "_cdll", lambda path: FakeLib(create_status=1))
    with pytest.raises(DeviceError, match="cublasCreate failed: CUBLAS_STATUS_NOT_INITIALIZED"):
        cublas.handle(0)


def test_gemm_swaps_to_column_major(monkeypatch):
    fake = FakeLib()
    monkeypatch.setattr(cublas, "_cdll", lambda path: fake)
    # row major C (2, 3) = A (2, 4) · Bᵀ with B stored (3, 4)
    cublas.gemm(0, np.float32, False, True, 2, 3, 4, 1.5, 1000, 4, 0, 2000, 4, 0, 0.0, 3000, 3, 0)
    name, args = fake.calls[-1]
    assert name == "cublasSgemm_v2"
    h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc = args
    assert (ta, tb, m, n, k) == (cublas.OP_T, cublas.OP_N, 3, 2, 4)  # B first, dims swapped
    assert (a, lda, b, ldb, c, ldc) == (2000, 4, 1000, 4, 3000, 3)
    assert alpha._obj.value == 1.5 and beta._obj.value == 0.0
    cublas.gemm(0, np.float16, True, False, 5, 6, 7, 1.0, 1, 5, 35, 2, 6, 0, 1.0, 3, 6, 30, 4)
    name, args = fake.calls[-1]
    assert name == "cublasGemmStridedBatchedEx"
    assert args[1:6] == (cublas.OP_N, cublas.OP_T, 6, 5, 7)
    assert args[7:11] == (2, cublas.CUDA_R_16F, 6, 0)  # B, its type, ldb, its stride
    assert args[11:15] == (1, cublas.CUDA_R_16F, 5, 35)
    assert args[16:] == (3, cublas.CUDA_R_16F, 6, 30, 4, cublas.COMPUTE_32F, cublas.GEMM_DEFAULT)


def _column_major(addr, rows, cols, ld, dtype):
    """A writable view of the column-major (rows, cols) matrix with leading dim ld at addr."""
    dtype = np.dtype(dtype)
    count = (cols - 1) * ld + rows
    buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(addr)
    flat = np.frombuffer(buf, dtype, count)
    return np.lib.stride_tricks.as_strided(
        flat, (rows, cols), (dtype.itemsize, ld * dtype.itemsize)
    )


class ReferenceBlas(FakeLib):
    """cublasSgemmStridedBatched computed as the column-major BLAS defines it."""

    def __init__(self):
        super().__init__()
        self.cublasSgemmStridedBatched = _function(self._sgemm)

    def _sgemm(self, h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, count):
        for z in range(count):
            op_a = _column_major(a + 4 * z * sa, k if ta else m, m if ta else k, lda, np.float32)
            op_b = _column_major(b + 4 * z * sb, n if tb else k, k if tb else n, ldb, np.float32)
            out = _column_major(c + 4 * z * sc, m, n, ldc, np.float32)
            prod = (op_a.T if ta else op_a) @ (op_b.T if tb else op_b)
            out[...] = alpha._obj.value * prod + beta._obj.value * out
        return 0


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_matches_numpy_on_host_memory(monkeypatch, trans_a, trans_b):
    """The row-major call, run by a column-major BLAS, gives numpy's row-major product."""
    monkeypatch.setattr(cublas, "_cdll", lambda path: ReferenceBlas())
    rng = np.random.default_rng(0)
    batch, m, n, k = 3, 4, 5, 6
    a = rng.normal(size=(batch, k, m) if trans_a else (batch, m, k)).astype(np.float32)
    b = rng.normal(size=(k, n) if not trans_b else (n, k)).astype(np.float32)  # shared: stride 0
    c = rng.normal(size=(batch, m, n)).astype(np.float32)
    want = 2.0 * np.swapaxes(a, 1, 2) if trans_a else 2.0 * a
    want = want @ (b.T if trans_b else b) + 0.5 * c
    cublas.gemm(0, np.float32, trans_a, trans_b, m, n, k, 2.0, a.ctypes.data, a.shape[2], m * k,
                b.ctypes.data, b.shape[1], 0, 0.5, c.ctypes.data, n, m * n, batch)  # fmt: skip
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)
