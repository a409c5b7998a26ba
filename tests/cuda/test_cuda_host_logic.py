"""The host-side logic of the CUDA path that runs without a GPU: which convs cuDNN is asked
for, the metadata cache, and the optimizer's one-value checks."""

import numpy as np
import pytest

from netbrew.cuda import cudnn
from netbrew.errors import ShapeError
from netbrew.operators.cuda import launch, optim
from netbrew.operators.window import make_window


@pytest.fixture
def cudnn_on(monkeypatch):
    """cudnn.plan past its `enabled` check, with Plan construction recorded, not run."""
    made = []
    monkeypatch.setattr(cudnn, "enabled", lambda: True)
    monkeypatch.setattr(cudnn, "Plan", lambda *args: made.append(args) or args)
    monkeypatch.setattr(cudnn, "_plans", {})
    return made


def test_cudnn_is_asked_for_batched_symmetric_convs_of_1_to_3_axes(cudnn_on):
    win = make_window((9, 9), (3, 3), [2, 2], None, [1, 1, 1, 1])
    assert cudnn.plan(0, (2, 4, 9, 9), (6, 2, 3, 3), win, 2) is not None
    assert cudnn.plan(0, (2, 4, 9, 9), (6, 2, 3, 3), win, 2) is cudnn_on[0]  # kept
    (device, x_shape, w_shape, y_shape, pads, strides, dilations, group) = cudnn_on[0]
    assert (x_shape, y_shape, pads, strides, group) == ([2, 4, 9, 9], [2, 6, 5, 5], [1, 1],
                                                        [2, 2], 2)  # fmt: skip
    line = make_window((7,), (3,), None, [2], [2, 2])
    assert cudnn.plan(0, (2, 1, 7), (1, 1, 3), line, 1) is not None  # 1-D: a unit axis first
    assert cudnn_on[-1][1] == [2, 1, 1, 7] and cudnn_on[-1][4] == [0, 2]


@pytest.mark.parametrize(
    "x_shape, w_shape, kernel, pads",
    [
        ((1, 4, 9, 9), (6, 4, 3, 3), (3, 3), [1, 1, 1, 1]),  # one image: im2col + cuBLAS
        ((2, 4, 9, 9), (6, 4, 3, 3), (3, 3), [0, 1, 1, 1]),  # asymmetric pads
        ((2, 1, 3, 3, 3, 3), (1, 1, 1, 1, 1, 1), (1, 1, 1, 1), None),  # 4 spatial axes
        ((2, 0, 9, 9), (6, 0, 3, 3), (3, 3), [1, 1, 1, 1]),  # no channels
    ],
)
def test_cudnn_is_not_asked_for_what_it_cannot_run(cudnn_on, x_shape, w_shape, kernel, pads):
    win = make_window(x_shape[2:], kernel, None, None, pads)
    assert cudnn.plan(0, x_shape, w_shape, win, 1) is None and not cudnn_on


def test_cudnn_off_by_environment(monkeypatch):
    monkeypatch.setenv("NETBREW_CUDNN", "0")
    assert not cudnn.enabled()


def test_metadata_is_uploaded_once_per_content(monkeypatch):
    uploads = []
    monkeypatch.setattr(launch, "to_gpu", lambda a, device=None: uploads.append(a) or a.copy())
    monkeypatch.setattr(launch, "_constants", launch.OrderedDict())
    monkeypatch.setattr(launch, "CONSTANTS", 2)
    first = launch.constant([3, 4, 5])
    assert launch.constant(np.array([3, 4, 5])) is first and len(uploads) == 1
    assert launch.constant([3, 4, 5], np.int32) is not first  # another dtype, another upload
    launch.constant([6])  # a third entry evicts the least recently used: [3, 4, 5] int64
    assert launch.constant([3, 4, 5]) is not first and len(uploads) == 4
    big = np.arange(launch.CONSTANT_BYTES // 8 + 1)
    assert launch.constant(big) is not launch.constant(big)  # too big to keep


def test_optimizer_scalars_must_hold_one_value():
    with pytest.raises(ShapeError, match=r"MomentumSGDUpdate: input 'lr' has shape \[2\]"):
        optim.on_device(np.ones(2, np.float32), np.dtype(np.float32), "MomentumSGDUpdate", "lr")
    with pytest.raises(ShapeError, match="'weight1' has shape"):
        optim.check_one(np.ones((1, 3)), "WeightedSum", "weight1")


def test_cudnn_benchmark_mode_keeps_the_fastest_algorithm_else_the_heuristics(monkeypatch):
    """Plan.algo's choice, with cuDNN's calls replaced by ones that take known times on a
    clock of the test's own."""
    import types

    import netbrew.cuda

    seconds = {1: 0.004, 4: 0.001, 5: 0.00102, 7: 0.003}  # algo 6 is refused (status 3)
    launched, clock = [], [0.0]

    def launch(name, algo, size, operands):
        launched.append(algo)
        if algo == 6:
            return 3
        clock[0] += seconds[algo]
        return 0

    monkeypatch.setattr(cudnn, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    plan = cudnn.Plan.__new__(cudnn.Plan)
    plan.device, plan._algos = 0, {}
    found = [(1, 0), (6, 0), (4, 1 << 20), (5, 1 << 10), (7, 0)]  # heuristic order
    monkeypatch.setattr(plan, "candidates", lambda kind: list(found))
    monkeypatch.setattr(plan, "_launch", launch)
    monkeypatch.setattr(netbrew.cuda, "synchronize", lambda device=0: None)
    monkeypatch.setenv("NETBREW_CUDNN_BENCHMARK", "0")
    assert plan.algo("fwd", operands=()) == (1, 0) and launched == []  # the heuristic's pick
    monkeypatch.setenv("NETBREW_CUDNN_BENCHMARK", "1")
    # 4 and 5 within 5%: the smaller workspace wins
    assert plan.algo("data", operands=()) == (5, 1 << 10)
    assert launched.count(6) == 1 and launched.count(1) == 1 + cudnn.BENCHMARK_RUNS
    assert plan.algo("data", operands=()) == (5, 1 << 10)  # kept: nothing timed again
    assert plan.algo("filter") == (1, 0)  # no tensors to time on
