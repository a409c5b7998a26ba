"""The dag runtime: same results as simple, hazards and control_input respected, failures."""

import threading
import time

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import RUNTIMES, Workspace, create_runtime
from netbrew.executor.dag import (
    TUNING_RUNS,
    DagNet,
    chain_tasks,
    num_workers,
    op_dependencies,
)
from netbrew.netdef import Net
from netbrew.proto.netbrew_pb2 import NetDef


def run(net: Net, feeds: dict, net_type: str, workers: int = 4) -> dict:
    clone = net.clone(net.name)
    clone.set_type(net_type, num_workers=workers if net_type != "simple" else None)
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.create_net(clone)
    ws.run_net(clone.name, num_iter=2)
    return {name: ws.fetch_blob(name) for name in ws.blobs()}


def assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def wide_net() -> tuple[Net, dict]:
    """8 independent branches of Conv or MatMul plus elementwise ops, summed at the end."""
    rng = np.random.default_rng(0)
    net = Net("wide")
    feeds = {"x": rng.normal(size=(2, 3, 16, 16)).astype(np.float32)}
    outs = []
    for b in range(8):
        if b % 2:
            feeds[f"w{b}"] = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
            y = net.Conv(["x", f"w{b}"], f"conv{b}", kernel_shape=[3, 3], pads=[1] * 4)
            y = y.Relu([], f"relu{b}").Mul([y], f"sq{b}")
        else:
            feeds[f"w{b}"] = rng.normal(size=(16, 16)).astype(np.float32)
            y = net.MatMul(["x", f"w{b}"], f"mm{b}").Sigmoid([], f"sig{b}")
            y = y.Add([f"mm{b}"], f"add{b}").Tanh([], f"tanh{b}")
        outs.append(net.ReduceSum([y], f"sum{b}", keepdims=0))
    total = outs[0]
    for i, o in enumerate(outs[1:]):
        total = net.Add([total, o], f"total{i}")
    net.add_external_output(total)
    return net, feeds


def test_dag_and_parallel_are_registered_and_caffe2_names_map_to_dag():
    for name in ("dag", "parallel", "async_dag", "async_scheduling"):
        assert RUNTIMES[name] is DagNet
    net = NetDef(name="n", type="parallel")
    assert isinstance(create_runtime(net), DagNet)


def test_wide_net_matches_simple():
    net, feeds = wide_net()
    assert_same(run(net, feeds, "dag"), run(net, feeds, "simple"))
    runtime = create_runtime(net.clone("w2").proto())
    dag = DagNet(runtime.net, runtime.ops)
    # each branch's elementwise tail is chained onto its first op
    assert len(dag.tasks) < len(dag.ops)


def test_chain_matches_simple_and_is_one_task():
    net = Net("chain")
    y = net.Relu(["x"], "a").Sigmoid([], "b").Tanh([], "c").Neg([], "d")
    net.Exp([y], "e")
    feeds = {"x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)}
    assert_same(run(net, feeds, "dag"), run(net, feeds, "simple"))
    runtime = create_runtime(net.proto())
    assert chain_tasks(op_dependencies(runtime.ops)) == [[0, 1, 2, 3, 4]]


def test_hazards_in_place_and_overwrite_after_read():
    net = Net("hazards")
    net.Relu(["x"], "t")  # 0 writes t
    net.Sigmoid(["t"], "r1")  # 1 reads t (RAW on 0)
    net.Tanh(["t"], "r2")  # 2 reads t (RAW on 0)
    net.Neg(["x"], "t")  # 3 overwrites t: WAR on 1, 2 and WAW on 0
    net.Relu(["t"], "t")  # 4 in place: RAW and WAW on 3
    net.Add(["r1", "t"], "out")  # 5
    deps = op_dependencies(create_runtime(net.proto()).ops)
    assert deps[1] == {0} and deps[2] == {0}
    assert deps[3] == {0, 1, 2}
    assert deps[4] == {3}
    assert deps[5] == {1, 4}
    feeds = {"x": np.linspace(-3, 3, 64, dtype=np.float32)}
    for _ in range(5):
        assert_same(run(net, feeds, "dag"), run(net, feeds, "simple"))


def slow_kernel(op, record, delay=0.0):
    kernel = op.kernel

    def wrapped(*args, **kwargs):
        time.sleep(delay)
        record.append(op.index)
        return kernel(*args, **kwargs)

    op.kernel = wrapped


def test_control_input_orders_ops_without_data_dependency():
    net = Net("ctrl")
    net.Relu(["x"], "first")  # 0
    net.add_op("Neg", ["x"], "second", control_input=["first"])  # 1
    runtime = create_runtime(net.proto())
    assert op_dependencies(runtime.ops)[1] == {0}
    net.set_type("dag", num_workers=4)
    dag = create_runtime(net.proto())
    record = []
    slow_kernel(dag.ops[0], record, delay=0.05)
    slow_kernel(dag.ops[1], record)
    dag.run({"x": np.ones(3, np.float32)})
    assert record == [0, 1]


def test_failure_raises_the_ops_operator_error_and_starts_nothing_new():
    net = Net("fail")
    net.MatMul(["a", "b"], "bad")  # 0: shapes do not match
    for i in range(6):
        net.Relu(["a"], f"ok{i}")  # independent ops, queued behind the failure
    net.Relu(["bad"], "after")  # depends on the failure
    net.set_type("dag", num_workers=1)
    dag = create_runtime(net.proto())
    raised = []
    original = dag.ops[0].run

    def capture(blobs):
        try:
            original(blobs)
        except OperatorError as e:
            raised.append(e)
            raise

    dag.ops[0].run = capture
    blobs = {"a": np.ones((2, 3), np.float32), "b": np.ones((4, 5), np.float32)}
    with pytest.raises(OperatorError, match=r"op #0 MatMul failed on cpu") as info:
        dag.run(blobs)
    assert info.value is raised[0]
    assert "after" not in blobs
    assert not any(f"ok{i}" in blobs for i in range(6))
    # the runtime is still usable
    blobs["b"] = np.ones((3, 5), np.float32)
    dag.run(blobs)
    assert blobs["after"].shape == (2, 5)


def test_concurrent_branches_overlap():
    """With 2 workers, two independent ops run at the same time: each waits at a barrier
    the other must reach, which only works if both run at once (no timing involved)."""
    net = Net("overlap")
    net.Relu(["x"], "a")
    net.Neg(["x"], "b")
    net.set_type("dag", num_workers=2, adaptive=False)
    dag = create_runtime(net.proto())
    barrier = threading.Barrier(2, timeout=10)
    threads = set()
    for op in dag.ops:
        kernel = op.kernel

        def wrapped(*args, _k=kernel, **kwargs):
            threads.add(threading.get_ident())
            barrier.wait()  # raises BrokenBarrierError if the ops ran one after the other
            return _k(*args, **kwargs)

        op.kernel = wrapped
    dag.run({"x": np.ones(3, np.float32)})
    assert len(threads) == 2


def test_num_workers_from_arg_field_or_default():
    net = NetDef(name="n", type="dag")
    assert num_workers(net) == 2
    net.num_workers = 3
    assert num_workers(net) == 3
    wrapped = Net(net)
    wrapped.set_type("dag", num_workers=5)  # the argument wins over the field
    assert num_workers(wrapped.proto()) == 5
    assert create_runtime(wrapped.proto()).num_workers == 5
    wrapped.set_type("dag", num_workers=0)
    with pytest.raises(ValueError, match="num_workers must be at least 1"):
        num_workers(wrapped.proto())


def test_adaptive_mode_is_measured_then_kept_and_results_never_change():
    net, feeds = wide_net()
    net.set_type("dag", num_workers=2)
    dag = create_runtime(net.proto())
    expected = run(net, feeds, "simple")
    for i in range(2 * (TUNING_RUNS + 1) + 2):
        assert dag.mode is None or i >= 2 * (TUNING_RUNS + 1)
        blobs = dict(feeds)
        dag.run(blobs)
        assert_same(blobs, expected)
    assert dag.mode in ("parallel", "in_order")
    assert [len(v) for v in dag._samples.values()] == [TUNING_RUNS + 1] * 2


def test_adaptive_off_or_one_worker_fixes_the_mode():
    net, _ = wide_net()
    net.set_type("dag", num_workers=2, adaptive=False)
    assert create_runtime(net.proto()).mode == "parallel"
    net.set_type("dag", num_workers=1, adaptive=True)
    assert create_runtime(net.proto()).mode == "in_order"
