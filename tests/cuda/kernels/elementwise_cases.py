"""Inputs and tolerances shared by the elementwise CUDA kernels' tests."""

import numpy as np

from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.testing import rand

# Empty, one element, odd sizes around a block (256 threads), and a rank-3 tensor.
SHAPES = [(0,), (1,), (7,), (257,), (3, 5, 33)]

# float16: the CPU rounds after every NumPy step, the GPU once; float32: --use_fast_math.
TOL = {
    np.dtype(np.float32): {"atol": 1e-5, "rtol": 1e-5},
    np.dtype(np.float16): {"atol": 1e-2, "rtol": 1e-2},
    np.dtype(np.float64): {"atol": 1e-12, "rtol": 1e-10},
    **{np.dtype(t): {} for t in (np.int8, np.int32, np.int64, np.uint16, np.bool_)},
}


def data(shape, dtype, low=-1.0, high=1.0, seed=0):
    """Uniform values in [low, high) of `dtype` (integers: rounded toward zero)."""
    return rand(*shape, seed=seed, low=low, high=high).astype(np.float64).astype(dtype)


def run_device(op_type, inputs, outputs=1, device="cuda:0", **attrs):
    """Runs one op with its inputs fed to `device` (None: an omitted input); the outputs
    (a count, or names with "" for unnamed) copied back, None for an unnamed one."""
    ws = Workspace()
    names = []
    for i, value in enumerate(inputs):
        names.append("" if value is None else f"in{i}")
        if value is not None:
            ws.feed_blob(f"in{i}", value, device=device)
    outs = [f"out{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
    ws.run_operator_once(op_def(op_type, names, outs, device=device, **attrs))
    return [ws.fetch_blob(n) if n else None for n in outs]


def check_outputs(op_type, inputs, outputs, atol=1e-5, rtol=1e-5, **attrs):
    """check_device for ops with optional outputs: `outputs` names them, "" leaves one
    unset (the kernels see it in output_mask)."""
    want = run_device(op_type, inputs, outputs, device="cpu", **attrs)
    got = run_device(op_type, inputs, outputs, **attrs)
    for i, (g, e) in enumerate(zip(got, want)):
        where = f"{op_type} output {i} on cuda:0"
        if e is None:
            assert g is None, where
            continue
        assert g.shape == e.shape, f"{where}: shape {g.shape}, expected {e.shape}"
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, err_msg=where)
        else:
            np.testing.assert_array_equal(g, e, err_msg=where)
    return got
