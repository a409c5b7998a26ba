"""The simple runtime's op batches (netbrew/executor/batching.py), driven on CPU through a
batched kernel registered for the test: which ops batch, the results, errors, profiles."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.executor.batching import OpBatch
from netbrew.netdef import Net
from netbrew.operators.schema import BATCHED
from netbrew.operators.train import momentum_sgd_update_cpu

SHAPES = [(3, 4), (5,), (2, 2, 2), (7,)]


@pytest.fixture
def batched(monkeypatch):
    """A CPU batched MomentumSGDUpdate that records the size of every batch it runs."""
    seen = []

    def kernel(calls, **attrs):
        seen.append(len(calls))
        return [momentum_sgd_update_cpu(*call, **attrs) for call in calls]

    monkeypatch.setitem(BATCHED._items, ("MomentumSGDUpdate", "cpu"), kernel)
    return seen


def sgd_net(shapes=SHAPES, momentum=(0.9,) * 4, chain=False):
    """One MomentumSGDUpdate per parameter, in place, as brew's optimizer writes them."""
    net = Net("sgd")
    for i, m in enumerate(momentum[: len(shapes)]):
        grad = f"p{i - 1}" if chain and i else f"g{i}"  # chain: reads the last op's param
        net.MomentumSGDUpdate([grad, f"m{i}", "lr", f"p{i}"], [grad, f"m{i}", f"p{i}"],
                              momentum=m, nesterov=1)  # fmt: skip
    return net


def feed(ws, shapes=SHAPES):
    rng = np.random.default_rng(0)
    ws.feed_blob("lr", np.array([0.1], np.float32))
    for i, shape in enumerate(shapes):
        for kind in "gmp":
            ws.feed_blob(f"{kind}{i}", rng.standard_normal(shape).astype(np.float32))


def run(net, monkeypatch, batching: bool, shapes=SHAPES):
    monkeypatch.setenv("NETBREW_BATCH_OPS", "1" if batching else "0")
    ws = Workspace()
    feed(ws, shapes)
    ws.create_net(net)
    for _ in range(3):
        ws.run_net(net.name)
    return ws, {name: ws.fetch_blob(name) for name in ws.blobs()}


def steps(ws, net):
    return ws.get_net(net.name).steps


def test_a_run_of_updates_is_one_batch_with_the_same_results(batched, monkeypatch):
    net = sgd_net()
    ws, ours = run(net, monkeypatch, batching=True)
    (step,) = steps(ws, net)
    assert isinstance(step, OpBatch) and len(step.ops) == 4
    assert batched == [4, 4, 4]
    _, theirs = run(net, monkeypatch, batching=False)
    assert batched == [4, 4, 4]  # unbatched: the plain kernels ran
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_ops_that_read_an_earlier_ops_output_or_differ_in_arguments_split(batched, monkeypatch):
    same = [(4,)] * 4
    net = sgd_net(same, chain=True)
    ws, _ = run(net, monkeypatch, batching=True, shapes=same)
    assert not any(isinstance(s, OpBatch) for s in steps(ws, net))
    net = sgd_net(momentum=(0.9, 0.9, 0.5, 0.5))
    ws, ours = run(net, monkeypatch, batching=True)
    assert [len(s.ops) for s in steps(ws, net)] == [2, 2]
    _, theirs = run(net, monkeypatch, batching=False)
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_a_refused_batch_reports_the_failing_op(batched, monkeypatch):
    net = sgd_net()
    monkeypatch.setenv("NETBREW_BATCH_OPS", "1")
    ws = Workspace()
    feed(ws)
    ws.feed_blob("m2", np.zeros((3,), np.float32))  # op #2's moment has the wrong shape
    ws.create_net(net)
    with pytest.raises(OperatorError, match=r"op #2 MomentumSGDUpdate.*moment"):
        ws.run_net(net.name)
    # the ops before it ran, as they do one by one
    assert ws.fetch_blob("p0").shape == (3, 4)


def test_profiles_still_time_every_op(batched, monkeypatch):
    net = sgd_net()
    monkeypatch.setenv("NETBREW_BATCH_OPS", "1")
    ws = Workspace()
    feed(ws)
    ws.create_net(net)
    profile = ws.run_net(net.name, profile=True)
    assert len(profile.records) == 4
    assert batched == []
