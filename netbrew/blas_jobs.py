"""The numba side of netbrew.blas_pool: the cfunc OpenBLAS calls with the jobs of a
threaded BLAS call, and the `prange` that runs them on numba's OpenMP team. Imported only
where numba is."""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
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


_SIGNATURE = types.void(types.int32, types.intp, types.int32, types.intp, types.intp, types.int32)
"""void callback(int sync, openblas_dojob_callback dojob, int numjobs, size_t jobdata_elsize,
void *jobdata, int dojob_data), the pointers taken as integers (the same registers and
stack slots on the 64-bit ABIs numba targets)."""


def _callback(sync, dojob, jobs, size, data, buffer):
    run_jobs(dojob, jobs, size, data, buffer)


def start():
    """Starts numba's threading layer (a region with no jobs), then builds (or loads from
    numba's cache) the cfunc; (threading layer's name, cfunc). The layer must be up first:
    cached code that launches a parallel region links against its symbols."""
    run_jobs(0, np.int32(0), 0, 0, np.int32(0))
    callback = numba.cfunc(_SIGNATURE, nopython=True, cache=True)(_callback)
    return numba.threading_layer(), callback
