"""Helpers for operator tests: run one op through a Workspace and compare with NumPy.

check_op("Relu", [rand(3, 4)], reference=lambda x: (np.maximum(x, 0),))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netbrew.executor import Workspace
from netbrew.netdef import op_def


def rand(*shape: int, dtype: Any = np.float32, seed: int = 0, low: float = -1.0, high: float = 1.0):
    """Uniform random values in [low, high) with a fixed seed."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(dtype)


def run_op(
    op_type: str,
    inputs: Sequence[Any],
    *,
    outputs: int | Sequence[str] = 1,
    device: str | None = None,
    **attrs: Any,
) -> list[np.ndarray]:
    """Runs one op in a fresh Workspace. None in `inputs` is an omitted optional input.
    With `device` ("cuda:0"), the inputs are fed there and the op runs there.

    Returns:
        The fetched outputs, in order (copied back to NumPy).
    """
    ws = Workspace()
    in_names = []
    for i, value in enumerate(inputs):
        if value is None:
            in_names.append("")
        else:
            ws.feed_blob(f"in{i}", value, device=device)
            in_names.append(f"in{i}")
    out_names = [f"out{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
    ws.run_operator_once(op_def(op_type, in_names, out_names, device=device, **attrs))
    return [ws.fetch_blob(n) for n in out_names if n]


def check_op(
    op_type: str,
    inputs: Sequence[Any],
    reference: Callable[..., Sequence[Any]],
    *,
    outputs: int | Sequence[str] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-5,
    check_dtype: bool = True,
    **attrs: Any,
) -> list[np.ndarray]:
    """Asserts that the op's outputs equal `reference(*inputs)` in shape, dtype and values."""
    expected = [np.asarray(e) for e in reference(*inputs)]
    got = run_op(op_type, inputs, outputs=len(expected) if outputs is None else outputs, **attrs)
    assert len(got) == len(expected), f"{op_type}: {len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.shape == e.shape, f"{op_type} output {i}: shape {g.shape}, expected {e.shape}"
        if check_dtype:
            assert g.dtype == e.dtype, f"{op_type} output {i}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, err_msg=f"{op_type} out {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"{op_type} output {i}")
    return got


def check_gradient(
    op_type: str,
    inputs: Sequence[Any],
    *,
    wrt: int | Sequence[int] | None = None,
    outputs: int = 1,
    grad_outputs: Sequence[int] | None = None,
    eps: float = 1e-3,
    rtol: float = 1e-2,
    atol: float = 1e-4,
    max_points: int = 60,
    **attrs: Any,
) -> None:
    """Checks an op's registered gradient against central differences in float64.

    The scalar checked is f = sum_k sum(Y_k * R_k) over the outputs in `grad_outputs`,
    with fixed random R_k, so every element of every output counts.

    Args:
        op_type: the forward op.
        inputs: its inputs; float arrays are promoted to float64.
        wrt: index or indices of the inputs to check; default every float input.
        outputs: how many outputs the op is created with.
        grad_outputs: outputs that receive a gradient; default all float outputs.
        max_points: elements per input checked numerically (a fixed random sample).
    """
    from netbrew.operators import GRADIENTS

    xs = [
        np.asarray(x, np.float64) if x is not None and np.asarray(x).dtype.kind == "f" else x
        for x in inputs
    ]
    if wrt is None:
        wrt = [i for i, x in enumerate(xs) if x is not None and x.dtype == np.float64]
    wrt = [wrt] if isinstance(wrt, int) else list(wrt)
    in_names = ["" if x is None else f"in{i}" for i, x in enumerate(xs)]
    out_names = [f"out{k}" for k in range(outputs)]
    forward = op_def(op_type, in_names, out_names, **attrs)

    def run(values):
        ws = Workspace()
        for name, value in zip(in_names, values):
            if name:
                ws.feed_blob(name, value)
        ws.run_operator_once(forward)
        return ws, [ws.fetch_blob(n) for n in out_names]

    ws, ys = run(xs)
    if grad_outputs is None:
        grad_outputs = [k for k, y in enumerate(ys) if y.dtype.kind == "f"]
    rng = np.random.default_rng(0)
    weights = {k: rng.normal(size=ys[k].shape) for k in grad_outputs}
    g_out = [f"out{k}_grad" if k in weights else None for k in range(outputs)]
    g_in = [f"in{i}_grad" if i in wrt else None for i in range(len(xs))]
    maker = GRADIENTS[op_type]
    for k, w in weights.items():
        ws.feed_blob(g_out[k], w.astype(ys[k].dtype))
    for grad_op in maker(forward, g_out, g_in):
        ws.run_operator_once(grad_op)

    def f(values):
        outs = run(values)[1]
        return sum(float(np.sum(outs[k] * w)) for k, w in weights.items())

    for i in wrt:
        analytic = ws.fetch_blob(g_in[i])
        assert analytic.shape == xs[i].shape, (
            f"{op_type} d{in_names[i]}: shape {analytic.shape}, expected {xs[i].shape}"
        )
        flat = xs[i].reshape(-1)
        points = rng.permutation(flat.size)[:max_points]
        numeric = np.empty(len(points))
        for n, j in enumerate(points):
            plus, minus = ([x.copy() if x is not None else None for x in xs] for _ in range(2))
            plus[i].reshape(-1)[j] += eps
            minus[i].reshape(-1)[j] -= eps
            numeric[n] = (f(plus) - f(minus)) / (2 * eps)
        np.testing.assert_allclose(
            analytic.reshape(-1)[points],
            numeric,
            rtol=rtol,
            atol=atol,
            err_msg=f"{op_type}: gradient of input {i} disagrees with central differences",
        )


def check_device(
    op_type: str,
    inputs: Sequence[Any],
    *,
    outputs: int = 1,
    device: str = "cuda:0",
    atol: float = 1e-5,
    rtol: float = 1e-5,
    **attrs: Any,
) -> list[np.ndarray]:
    """Asserts that the op's kernel on `device` (inputs fed there) gives the CPU kernel's
    outputs: shapes and dtypes equal, values within the tolerances. The NumPy kernel is
    every CUDA kernel's oracle. Returns the device's outputs, copied back."""
    expected = run_op(op_type, inputs, outputs=outputs, **attrs)
    got = run_op(op_type, inputs, outputs=outputs, device=device, **attrs)
    for i, (g, e) in enumerate(zip(got, expected)):
        where = f"{op_type} output {i} on {device}"
        assert g.shape == e.shape, f"{where}: shape {g.shape}, expected {e.shape}"
        assert g.dtype == e.dtype, f"{where}: dtype {g.dtype}, expected {e.dtype}"
        if e.dtype.kind in "fc":
            np.testing.assert_allclose(g, e, atol=atol, rtol=rtol, err_msg=where)
        else:
            np.testing.assert_array_equal(g, e, err_msg=where)
    return got
