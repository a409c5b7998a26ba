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
    op_type: str, inputs: Sequence[Any], *, outputs: int | Sequence[str] = 1, **attrs: Any
) -> list[np.ndarray]:
    """Runs one op in a fresh Workspace. None in `inputs` is an omitted optional input.

    Returns:
        The fetched outputs, in order.
    """
    ws = Workspace()
    in_names = []
    for i, value in enumerate(inputs):
        if value is None:
            in_names.append("")
        else:
            ws.feed_blob(f"in{i}", value)
            in_names.append(f"in{i}")
    out_names = [f"out{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
    ws.run_operator_once(op_def(op_type, in_names, out_names, **attrs))
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
