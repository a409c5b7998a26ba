"""Allreduce, Broadcast, Allgather and their gradient ops in a world of one, where each
collective copies (the 2-rank behaviour is tested under mpiexec in tests/distributed)."""

import numpy as np
import pytest

from netbrew.testing import check_gradient, check_op, rand


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_allreduce_copies_every_tensor(reduction):
    x, y = rand(3, 2), rand(4, seed=1).astype(np.float64)
    check_op("Allreduce", [x, y], reference=lambda a, b: (a, b), reduction=reduction)


def test_allreduce_sums_integers():
    check_op("Allreduce", [np.arange(5)], reference=lambda a: (a,))


def test_broadcast_and_allgather_copy():
    check_op("Broadcast", [rand(2, 2), np.arange(3)], reference=lambda a, b: (a, b), root=0)
    check_op("Allgather", [rand(3, 2)], reference=lambda a: (a,))


@pytest.mark.parametrize(
    "op, attrs",
    [("Allreduce", {"reduction": "sum"}), ("Broadcast", {"root": 0}), ("Allgather", {})],
)
def test_collective_gradients_against_central_differences(op, attrs):
    check_gradient(op, [rand(3, 2, seed=2)], **attrs)


def test_gradient_ops_in_a_world_of_one():
    dy = rand(4, 3)
    check_op("BroadcastGradient", [dy], reference=lambda d: (d,), root=0)
    check_op("AllgatherGradient", [dy, rand(4, 3, seed=1)], reference=lambda d, x: (d,))


def test_every_tensor_may_be_reduced_in_place():
    from netbrew.netdef import Net

    net = Net("in_place")
    net.add_external_input("a", "b")
    net.Allreduce(["a", "b"], ["a", "b"], reduction="mean")
    net.lint()  # no complaint: tensor k is written back to output k
    net.Allreduce(["a", "b"], ["b", "a"])
    with pytest.raises(Exception, match="does not allow"):
        net.lint()
