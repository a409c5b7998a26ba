"""Gradient checks of whole nets: add_gradient_ops against central differences.

Used by the control-flow, sequence and optional gradient tests, whose ops read blobs by
name from the enclosing scope or pass sequences (lists), which netbrew.testing's
check_gradient (one op, tensor inputs and outputs) cannot feed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netbrew.executor.runtime import create_runtime
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def graph(
    ops: Sequence[OperatorDef], inputs: Sequence[str] = (), outputs: Sequence[str] = ()
) -> NetDef:
    """A (sub)graph with formal inputs and outputs."""
    net = NetDef(name="g", external_input=list(inputs), external_output=list(outputs))
    net.op.extend(ops)
    return net


def run_blobs(net: NetDef, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Runs `net` on a plain dict (lists stay lists); returns every blob."""
    blobs = dict(feeds)
    create_runtime(net).run(blobs)
    return blobs


def net_gradients(
    ops: Sequence[OperatorDef], feeds: Mapping[str, Any], wrt: Sequence[str], loss: str = "loss"
) -> tuple[dict[str, str], dict[str, Any], NetDef]:
    """Builds ops + add_gradient_ops(loss, wrt), seeded with a float64 one, and runs it.

    Returns:
        (blob -> gradient blob name, every blob after the run, the net)
    """
    net = graph(ops)
    grads = add_gradient_ops(net, [loss], wrt=list(wrt), seeds={loss: "loss_seed"})
    blobs = run_blobs(net, {**feeds, "loss_seed": np.array(1.0)})
    return grads, blobs, net


def _entries(value: Any) -> list[np.ndarray]:
    return list(value) if isinstance(value, list) else [value]


def check_net_gradient(
    ops: Sequence[OperatorDef],
    feeds: Mapping[str, Any],
    wrt: Sequence[str],
    *,
    loss: str = "loss",
    eps: float = 1e-6,
    rtol: float = 1e-6,
    atol: float = 1e-7,
    max_points: int = 24,
) -> dict[str, Any]:
    """Asserts that autodiff's gradients of scalar `loss` match central differences.

    Args:
        ops: the forward net, ending in `loss`; float feeds should be float64.
        feeds: blob -> value (arrays, or lists of arrays for sequences).
        wrt: fed blobs to differentiate; a list's gradient must be a list of the same
            length (checked per tensor).
        max_points: elements per tensor checked (a fixed random sample).

    Returns:
        blob -> its analytic gradient, for further checks.
    """
    grads, blobs, _ = net_gradients(ops, feeds, wrt, loss)
    forward = graph(ops)
    rng = np.random.default_rng(0)

    def f(values):
        return float(np.sum(run_blobs(forward, values)[loss]))

    result = {}
    for name in wrt:
        assert name in grads, f"no gradient for {name!r}; got {sorted(grads)}"
        analytic = blobs[grads[name]]
        result[name] = analytic
        value = feeds[name]
        assert isinstance(analytic, list) == isinstance(value, list), f"{name}: kind differs"
        if isinstance(value, list):
            assert len(analytic) == len(value), f"d{name}: {len(analytic)} tensors"
        for e, (got, x) in enumerate(zip(_entries(analytic), _entries(value))):
            got = np.asarray(got)
            assert got.shape == x.shape, f"d{name}[{e}]: shape {got.shape}, expected {x.shape}"
            points = rng.permutation(x.size)[:max_points]
            numeric = []
            for j in points:
                moved = []
                for step in (eps, -eps):
                    entries = [t.copy() for t in _entries(value)]
                    entries[e].reshape(-1)[j] += step
                    fed = entries if isinstance(value, list) else entries[0]
                    moved.append(f({**feeds, name: fed}))
                numeric.append((moved[0] - moved[1]) / (2 * eps))
            np.testing.assert_allclose(
                got.reshape(-1)[points],
                numeric,
                rtol=rtol,
                atol=atol,
                err_msg=f"gradient of {name!r} (entry {e}) disagrees with central differences",
            )
    return result
