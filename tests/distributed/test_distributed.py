"""netbrew.distributed in a world of one: the API, the collective ops (which copy), and
the rewrites that make a brew model data-parallel."""

import subprocess
import sys

import numpy as np
import pytest

from netbrew import brew, distributed
from netbrew.brew import ModelHelper
from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.netdef.net import Net
from netbrew.testing import check_gradient, rand, run_op


def test_a_world_of_one_without_a_launcher():
    world = distributed.init()
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    assert distributed.current() is world
    distributed.barrier()
    x = np.arange(10)
    assert distributed.shard(x).tolist() == x.tolist()
    a, b = distributed.shard((x, x * 2))
    assert b.tolist() == (x * 2).tolist()


@pytest.mark.parametrize("size", [2, 3, 4])
def test_shards_are_disjoint_and_cover_the_data(size, monkeypatch):
    world = distributed.init()
    parts = []
    for rank in range(size):
        monkeypatch.setattr(world, "rank", rank)
        monkeypatch.setattr(world, "size", size)
        parts.append(distributed.shard(np.arange(11)).tolist())
    assert sum(parts, []) == list(range(11))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_collectives_copy_in_a_world_of_one():
    x, y = rand(3, 2), np.arange(4, dtype=np.int64)
    got = run_op("Allreduce", [x, y], outputs=2, reduction="sum")
    assert np.array_equal(got[0], x) and np.array_equal(got[1], y)
    assert np.array_equal(run_op("Allreduce", [x], reduction="mean")[0], x)
    assert np.array_equal(run_op("Broadcast", [y], root=0)[0], y)
    assert run_op("Allgather", [x])[0].shape == (3, 2)


def test_collective_arguments_are_checked():
    with pytest.raises(Exception, match="reduction='max' must be 'sum' or 'mean'"):
        run_op("Allreduce", [rand(2)], reduction="max")
    with pytest.raises(Exception, match="'mean' needs floating-point"):
        run_op("Allreduce", [np.arange(3)], reduction="mean")
    with pytest.raises(Exception, match="root=1 is not a rank of a world of 1"):
        run_op("Broadcast", [rand(2)], root=1)


@pytest.mark.parametrize("op, attrs", [("Allreduce", {"reduction": "mean"}),
                                       ("Broadcast", {}), ("Allgather", {})])  # fmt: skip
def test_collective_gradients(op, attrs):
    check_gradient(op, [rand(3, 2, seed=1)], **attrs)


def small_model(decay: float = 1e-4) -> ModelHelper:
    model = ModelHelper("dp", seed=0)
    h = brew.relu(model, brew.fc(model, "x", "fc1", 4, 8), "h")
    loss = model.net.AveragedLoss(brew.fc(model, h, "fc2", 8, 1), "loss")
    model.add_gradient_operators([loss])
    return model


def test_allreduce_gradients_follows_each_gradients_last_write():
    model = small_model()
    ops = distributed.allreduce_gradients(model, bucket_bytes=64)
    net = model.net.proto()
    placed = [i for i, op in enumerate(net.op) if op.type == "Allreduce"]
    assert len(placed) == len(ops) >= 2  # small buckets: more than one op
    covered = [b for i in placed for b in net.op[i].input]
    assert sorted(covered) == sorted(model.param_to_grad.values())
    for i in placed:
        for grad in net.op[i].input:  # after the op that finalizes it, before any reader
            writers = [j for j, op in enumerate(net.op[:i]) if grad in op.output]
            assert writers and not any(grad in op.input for op in net.op[max(writers) + 1 : i])
    assert list(net.op[placed[1]].control_input) == [net.op[placed[0]].output[0]]


def test_data_parallel_net_in_a_world_of_one_trains_as_before():
    plain, parallel = small_model(), small_model()
    distributed.allreduce_gradients(parallel)
    distributed.broadcast_parameters(parallel)
    assert any(op.type == "Broadcast" for op in parallel.param_init_net.ops)
    results = []
    for model in (plain, parallel):
        brew.optimizer.build_sgd(model, 0.1, momentum=0.9, weight_decay=1e-3)
        ws = Workspace()
        ws.run_net_once(model.param_init_net)
        ws.feed_blob("x", rand(5, 4))
        ws.create_net(model.net)
        ws.run_net(model.net.name, num_iter=3)
        results.append(ws.fetch_blob("fc1_w"))
    np.testing.assert_array_equal(*results)


def test_allreduce_gradients_needs_gradients():
    model = ModelHelper("none")
    brew.fc(model, "x", "fc", 2, 2)
    with pytest.raises(ValueError, match="call add_gradient_operators"):
        distributed.allreduce_gradients(model)


def test_collectives_are_kept_by_the_graph_passes():
    from netbrew.netdef.passes import optimize

    net = Net("keep")
    net.add_external_input("g")
    net.Allreduce("g", "g")
    assert [op.type for op in optimize(net.proto()).op] == ["Allreduce"]


def test_gradient_through_an_allreduce_in_a_net():
    net = Net("through")
    net.Mul(["x", "w"], "y")
    net.Allreduce("y", "z", reduction="sum")
    net.ReduceSum("z", "loss", keepdims=0)
    grads = add_gradient_ops(net, ["loss"], wrt=["w"])
    ws = Workspace()
    ws.feed_blob("x", np.array([2.0, 3.0], np.float32))
    ws.feed_blob("w", np.ones(2, np.float32))
    ws.run_net_once(net)
    assert ws.fetch_blob(grads["w"]).tolist() == [2.0, 3.0]


def test_launch_runs_a_script_on_ranks(tmp_path):
    pytest.importorskip("mpi4py")
    from netbrew.distributed.launch import find_mpiexec

    try:
        find_mpiexec()
    except Exception:
        pytest.skip("no mpiexec")
    script = tmp_path / "hello.py"
    script.write_text(
        "from netbrew import distributed\n"
        "w = distributed.init()\n"
        "print(f'rank {w.rank} of {w.size}', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "netbrew.cli", "launch", "-n", "2", "--timeout", "60",
         str(script)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # mpiexec forwards both ranks' output through one pipe, which may split their lines
    import re

    assert sorted(re.findall(r"rank (\d) of 2", done.stdout)) == ["0", "1"], done.stdout


def test_allgather_takes_one_tensor():
    ws = Workspace()
    ws.feed_blob("x", rand(2))
    with pytest.raises(SchemaError, match="Allgather"):
        ws.run_operator_once(op_def("Allgather", ["x", "x"], ["y"]))
