"""The numba side of netbrew.blas_pool: the cfunc OpenBLAS calls with the jobs of a
threaded BLAS call, and the `prange` that runs them on numba's OpenMP team. Imported only
where numba is."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _call_job(typingctx, fn, index, data, buffer):
    """fn(index, data, buffer) for OpenBLAS's job function at address fn, which is
    void (int thread_num, void *jobdata, int dojob_data)."""
    sig = types.void(types.intp, types.int32, types.intp, types.int32)

    def codegen(context, builder, signature, args):
        fn_address, i, job, buf = args
        bytes_ptr = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(32), bytes_ptr, ir.IntType(32)])
        target = builder.inttoptr(fn_address, fnty.as_pointer())
        builder.call(target, [i, builder.inttoptr(job, bytes_ptr), buf])
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(parallel=True, nogil=True, cache=True)
def run_jobs(dojob, jobs, size, data, buffer):
    """dojob(i, data + i * size, buffer) for every job i, all at once (one per thread)."""
    for i in numba.prange(jobs):
        _call_job(dojob, np.int32(i), data + i * size, np.int32(buffer))


@intrinsic
def _team(typingctx):
    """The calling thread's numba thread count: the threading layer's get_num_threads,
    linked by name (numba.get_num_threads inside a kernel is a ctypes pointer, which
    numba's cache cannot keep)."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        return builder.call(
            cgutils.get_or_insert_function(builder.module, fnty, "get_num_threads"), []
        )

    return types.int32(), codegen


@intrinsic
def _set_team(typingctx, n):
    """Sets the calling thread's numba thread count (the layer's set_num_threads, by name)."""

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.VoidType(), [ir.IntType(32)])
        builder.call(cgutils.get_or_insert_function(builder.module, fnty, "set_num_threads"), args)
        return context.get_dummy_value()

    return types.void(types.int32), codegen


@numba.njit(nogil=True, cache=True)
def _run_jobs_in_team(dojob, jobs, size, data, buffer):
    """`run_jobs` with a team of at least `jobs` threads: the jobs wait on each other, so
    a calling thread whose numba thread count is below the job count
    (numba.set_num_threads(1), say) gets `jobs` for this region, even past numba's most
    (OpenBLAS given more threads through threadpoolctl: OpenMP starts the extra ones)."""
    team = _team()
    if jobs > team:
        _set_team(np.int32(jobs))
    run_jobs(dojob, jobs, size, data, buffer)
    if jobs > team:
        _set_team(team)


_SIGNATURE = types.void(types.int32, types.intp, types.int32, types.intp, types.intp, types.int32)
"""void callback(int sync, openblas_dojob_callback dojob, int numjobs, size_t jobdata_elsize,
void *jobdata, int dojob_data), the pointers taken as integers (the same registers and
stack slots on the 64-bit ABIs numba targets)."""


def _callback(sync, dojob, jobs, size, data, buffer):
    _run_jobs_in_team(dojob, jobs, size, data, buffer)


def start():
    """Starts numba's threading layer (a region with no jobs), then builds (or loads from
    numba's cache) the cfunc; (threading layer's name, cfunc). The layer must be up first:
    cached code that launches a parallel region links against its symbols."""
    run_jobs(0, np.int32(0), 0, 0, np.int32(0))
    callback = numba.cfunc(_SIGNATURE, nopython=True, cache=True)(_callback)
    return numba.threading_layer(), callback


@intrinsic
def _call_sgemm(typingctx, fn, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    """cblas_sgemm(RowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb, 0, c, ldc) for an ILP64
    OpenBLAS's cblas_sgemm at address fn (int64 dimensions; ta, tb 111 or 112)."""
    sig = types.void(
        types.intp, types.int32, types.int32, *([types.int64] * 3), *([types.intp, types.int64] * 3)
    )

    def codegen(context, builder, signature, args):
        fn_address, ta_, tb_, m_, n_, k_, a_, lda_, b_, ldb_, c_, ldc_ = args
        i32, i64 = ir.IntType(32), ir.IntType(64)
        f32, fptr = ir.FloatType(), ir.FloatType().as_pointer()
        fnty = ir.FunctionType(
            ir.VoidType(),
            [i32, i32, i32, i64, i64, i64, f32, fptr, i64, fptr, i64, f32, fptr, i64],
        )
        target = builder.inttoptr(fn_address, fnty.as_pointer())
        one, zero = ir.Constant(f32, 1.0), ir.Constant(f32, 0.0)
        builder.call(
            target,
            [
                ir.Constant(i32, 101), ta_, tb_, m_, n_, k_, one,
                builder.inttoptr(a_, fptr), lda_, builder.inttoptr(b_, fptr), ldb_,
                zero, builder.inttoptr(c_, fptr), ldc_,
            ],
        )  # fmt: skip
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(parallel=True, nogil=True, cache=True)
def gemm_items(sgemm, ta, tb, m, n, k, a, sa, lda, b, sb, ldb, c, sc, ldc, items):
    """C_i = op(A_i) op(B_i) for i < items, A_i at address a + i * sa (bytes) and so on,
    the items spread over numba's threads, one cblas_sgemm call (at address sgemm) each."""
    for i in numba.prange(items):
        _call_sgemm(sgemm, ta, tb, m, n, k, a + i * sa, lda, b + i * sb, ldb, c + i * sc, ldc)
