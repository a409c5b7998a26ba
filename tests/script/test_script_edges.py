"""Script-mode edges found by using it as a PyTorch user would, each checked against the
function run eagerly (Python semantics) or NumPy."""

import numpy as np
import pytest

import netbrew as nb
import netbrew.nn.functional as F
from netbrew import nn


@nb.script
def counted(x, n: int):
    i = 0
    for i in range(n):  # noqa: B007  (its last value is the point)
        x = x + 1.0
    return x * i


@nb.script
def shifted(x, s: int, n: int):
    out = x
    for i in range(s, n):
        out = out + i
    return out


@nb.script
def negatives(x):
    return (x < 0).sum()


@nb.script
def head_tail(x, n: int):
    return x[:n], x[n:]


@nb.script
def scale(x, s: float = 2.0, n: int = 1):
    return x * s / n


def test_the_loop_counter_keeps_its_last_value():
    x = np.ones(2, np.float32)
    for n in (0, 1, 3):
        np.testing.assert_allclose(counted(x, n), counted.eager(x, n))


def test_range_takes_a_runtime_start():
    x = np.zeros(2, np.float32)
    np.testing.assert_allclose(shifted(x, 4, 7), shifted.eager(x, 4, 7))
    np.testing.assert_allclose(shifted(x, 5, 5), x)


def test_a_sum_of_bools_counts_them():
    x = np.float32([-1, 2, -3, 4])
    got = negatives(x)
    assert got.dtype == np.int64 and int(got) == 2
    assert F.sum(x < 0).dtype == np.int64


def test_slices_with_one_runtime_bound():
    x = np.arange(5, dtype=np.float32)
    head, tail = head_tail(x, 2)
    np.testing.assert_array_equal(head, x[:2])
    np.testing.assert_array_equal(tail, x[2:])


def test_defaults_and_keywords_bind_as_in_python():
    x = np.ones(3, np.float32)
    np.testing.assert_allclose(scale(x), 2 * x)
    np.testing.assert_allclose(scale(x, n=4), 0.5 * x)
    np.testing.assert_allclose(scale(x, s=3.0, n=2), 1.5 * x)
    with pytest.raises(TypeError, match="unexpected keyword argument 'k'"):
        scale(x, k=1)


def test_an_int_argument_refuses_a_float():
    with pytest.raises(TypeError, match="an int argument got 2.7"):
        counted(np.ones(2, np.float32), 2.7)


class Dropped(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    @nb.script
    def forward(self, x):
        return self.drop(x)


def test_a_module_compiles_apart_in_train_and_eval_mode():
    module, x = Dropped().train(), np.ones(64, np.float32)
    trained = module(x)
    assert (trained == 0).any()
    np.testing.assert_array_equal(module.eval()(x), x)
    assert (module.train()(x) == 0).any()


class Normed(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    @nb.script
    def forward(self, x):
        return self.bn(x)


def test_a_scripted_module_updates_its_running_statistics_as_eagerly():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    scripted, eager = Normed().train(), Normed().train()
    for _ in range(2):
        np.testing.assert_allclose(scripted(x), eager.forward.eager(x), rtol=1e-5, atol=1e-6)
    for name, value in eager.state_dict().items():
        np.testing.assert_allclose(scripted.state_dict()[name], value, rtol=1e-6)
    assert int(scripted.bn.num_batches_tracked) == 2


@nb.script
def powers(x, n: int):
    return x * 2**n


def test_an_int_power_of_a_runtime_int_is_a_float():
    x = np.ones(2, np.float32)
    for n in (-2, 0, 3):
        np.testing.assert_allclose(powers(x, n), powers.eager(x, n))


@nb.script
def clipped(x, n: int, s: float):
    return x * min(n, 2) + max(s, n)


def test_min_and_max_of_script_numbers():
    x = np.ones(2, np.float32)
    for n, s in ((3, 0.5), (1, 4.5), (-2, -3.0)):
        np.testing.assert_allclose(clipped(x, n, s), clipped.eager(x, n, s))
