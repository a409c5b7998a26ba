"""netbrew.nn layers: numbers against PyTorch with the same weights, init schemes, errors."""

import math

import numpy as np
import pytest

from netbrew import nn
from netbrew.nn import _dispatch

RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 10)).astype(np.float32)
X2 = RNG.standard_normal((4, 6)).astype(np.float32)
X5 = RNG.standard_normal((2, 2, 5, 6, 4)).astype(np.float32)

# (name, build(module namespace), input): each built with netbrew.nn and with torch.nn
CASES = [
    ("linear2d", lambda m: m.Linear(6, 5), X2),
    ("linear3d", lambda m: m.Linear(10, 4), X3),
    ("linear_nobias", lambda m: m.Linear(10, 4, bias=False), X3),
    ("conv1d", lambda m: m.Conv1d(3, 4, 3, stride=2, padding=1), X3),
    ("conv1d_same", lambda m: m.Conv1d(3, 6, 4, padding="same", dilation=2, groups=3), X3),
    ("conv2d", lambda m: m.Conv2d(3, 4, 3, stride=2, padding=1), X4),
    ("conv2d_rect", lambda m: m.Conv2d(3, 6, (3, 2), padding=(1, 0), groups=3, bias=False), X4),
    ("conv2d_same", lambda m: m.Conv2d(3, 4, 4, padding="same", dilation=2), X4),
    ("conv2d_valid", lambda m: m.Conv2d(3, 4, 3, padding="valid"), X4),
    ("convT", lambda m: m.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1), X4),
    ("convT_groups", lambda m: m.ConvTranspose2d(3, 6, (2, 3), stride=(1, 2), groups=3), X4),
    ("convT_dil", lambda m: m.ConvTranspose2d(3, 2, 3, dilation=2, bias=False), X4),
    ("conv3d", lambda m: m.Conv3d(2, 4, (3, 2, 3), stride=(1, 2, 1), padding=1), X5),
    ("convT1d", lambda m: m.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2), X3),
    ("convT3d", lambda m: m.ConvTranspose3d(2, 3, 2, stride=2, groups=1), X5),
    ("bn2d", lambda m: m.BatchNorm2d(3), X4),
    ("bn3d", lambda m: m.BatchNorm3d(2, momentum=0.05), X5),
    ("bn2d_noaffine", lambda m: m.BatchNorm2d(3, affine=False, momentum=0.3), X4),
    ("bn1d_3d", lambda m: m.BatchNorm1d(3, eps=1e-3), X3),
    ("bn1d_2d", lambda m: m.BatchNorm1d(6), X2),
    ("layernorm", lambda m: m.LayerNorm(10), X3),
    ("layernorm_2d", lambda m: m.LayerNorm([9, 9], eps=1e-3, bias=False), X4),
    ("relu", lambda m: m.ReLU(), X4),
    ("gelu", lambda m: m.GELU(), X4),
    ("gelu_tanh", lambda m: m.GELU(approximate="tanh"), X4),
    ("sigmoid", lambda m: m.Sigmoid(), X4),
    ("tanh", lambda m: m.Tanh(), X4),
    ("softmax", lambda m: m.Softmax(dim=1), X4),
    ("softmax_last", lambda m: m.Softmax(dim=-1), X3),
    ("maxpool", lambda m: m.MaxPool2d(2), X4),
    ("maxpool_pad_ceil", lambda m: m.MaxPool2d(3, 2, 1, ceil_mode=True), X4),
    ("maxpool_dilated", lambda m: m.MaxPool2d((3, 2), stride=1, dilation=2), X4),
    ("avgpool", lambda m: m.AvgPool2d(2), X4),
    ("avgpool_pad", lambda m: m.AvgPool2d(3, 2, 1), X4),
    ("avgpool_nopadcount_ceil", lambda m: m.AvgPool2d(3, 2, 1, True, False), X4),
    ("adaptive_1", lambda m: m.AdaptiveAvgPool2d(1), X4),
    ("adaptive_11", lambda m: m.AdaptiveAvgPool2d((1, 1)), X4),
    ("adaptive_3", lambda m: m.AdaptiveAvgPool2d(3), X4),
    ("adaptive_none", lambda m: m.AdaptiveAvgPool2d((None, 3)), X4),
    ("flatten", lambda m: m.Flatten(), X4),
    ("flatten_0_2", lambda m: m.Flatten(0, 2), X4),
    ("flatten_2", lambda m: m.Flatten(2), X4),
    ("dropout_eval", lambda m: m.Dropout(0.3), X4),
    ("identity", lambda m: m.Identity(3, k=1), X4),
]


def _pair(torch, build):
    ours, theirs = build(nn), build(torch.nn)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


@pytest.mark.parametrize("name, build, x", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_layer_matches_pytorch(name, build, x, training):
    torch = pytest.importorskip("torch")
    if training and name.startswith("dropout"):
        pytest.skip("training dropout is random; checked statistically below")
    ours, theirs = _pair(torch, build)
    ours.train(training)
    theirs.train(training)
    # BatchNorm shifts so the running statistics have something to learn
    y = ours(x + 1.0)
    expected = theirs(torch.from_numpy(x + 1.0)).detach().numpy()
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, atol=1e-5, rtol=1e-5)
    for key, value in theirs.state_dict().items():  # running statistics, num_batches_tracked
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), atol=1e-6, rtol=1e-6)


def test_batchnorm_running_stats_follow_pytorch_over_steps():
    torch = pytest.importorskip("torch")
    for build in (
        lambda m: m.BatchNorm2d(3, momentum=0.2),
        lambda m: m.BatchNorm2d(3, momentum=None),
    ):
        ours, theirs = _pair(torch, build)
        for step in range(4):
            x = (X4 * (step + 1) + step).astype(np.float32)
            y = ours(x)
            np.testing.assert_allclose(y, theirs(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
        ours.eval()
        theirs.eval()
        np.testing.assert_allclose(
            ours(X4), theirs(torch.from_numpy(X4)).detach().numpy(), atol=1e-5
        )
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-5)
        assert int(ours.num_batches_tracked) == 4


def test_batchnorm_without_running_stats_uses_batch_statistics():
    bn = nn.BatchNorm2d(3, track_running_stats=False).eval()
    mean = X4.mean(axis=(0, 2, 3), keepdims=True)
    var = X4.var(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(bn(X4), (X4 - mean) / np.sqrt(var + 1e-5), atol=1e-5)
    assert list(bn.state_dict()) == ["weight", "bias"]


def test_embedding_matches_pytorch_and_numpy():
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, lambda m: m.Embedding(10, 4, padding_idx=2))
    idx = np.array([[1, 2, 9], [0, 2, 3]], np.int64)
    y = ours(idx)
    np.testing.assert_array_equal(y, theirs(torch.from_numpy(idx)).detach().numpy())
    np.testing.assert_array_equal(y, ours.weight[idx])
    assert np.all(nn.Embedding(5, 3, padding_idx=-1).weight[4] == 0)


def test_conv_transpose_output_size_matches_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = _pair(torch, lambda m: m.ConvTranspose2d(3, 2, 3, stride=2, padding=1))
    for size in ([17, 17], [18, 18], [2, 2, 17, 18]):
        y = ours(X4, output_size=size)
        expected = theirs(torch.from_numpy(X4), output_size=size).detach().numpy()
        np.testing.assert_allclose(y, expected, atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range from 17 to 18"):
        ours(X4, output_size=[20, 20])


def test_init_schemes_follow_pytorch():
    nn.manual_seed(1)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    assert np.abs(lin.weight).max() <= bound and np.abs(lin.weight).max() > 0.99 * bound
    assert abs(lin.weight.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(lin.bias).max() <= bound
    conv = nn.Conv2d(8, 16, 3, groups=2)
    fan_in = 4 * 9
    assert conv.weight.shape == (16, 4, 3, 3)
    assert np.abs(conv.weight).max() <= 1 / math.sqrt(fan_in)
    convt = nn.ConvTranspose2d(8, 6, 3, groups=2)
    assert convt.weight.shape == (8, 3, 3, 3)
    assert np.abs(convt.weight).max() <= 1 / math.sqrt(3 * 9)  # fan_in from weight dim 1
    emb = nn.Embedding(2000, 50)
    assert abs(emb.weight.std() - 1.0) < 0.02
    bn = nn.BatchNorm2d(5)
    assert np.all(bn.weight == 1) and np.all(bn.bias == 0)
    assert bn.num_batches_tracked.dtype == np.int64 and bn.num_batches_tracked.shape == ()
    nn.manual_seed(1)
    np.testing.assert_array_equal(nn.Linear(400, 300).weight, lin.weight)


def test_dropout_training_statistics():
    nn.manual_seed(3)
    drop = nn.Dropout(0.25)
    x = np.ones((200, 200), np.float32)
    y = drop(x)
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert not np.array_equal(drop(x), y)  # a fresh mask each call
    np.testing.assert_array_equal(nn.Dropout(1.0)(x), 0.0)
    assert drop.eval()(x) is not None and np.array_equal(drop(x), x)


def test_unsupported_settings_raise_clear_errors():
    with pytest.raises(ValueError, match="divides the input size"):
        nn.AdaptiveAvgPool2d((2, 4))(X4)
    with pytest.raises(NotImplementedError, match="padding_mode='reflect'"):
        nn.Conv2d(3, 3, 3, padding_mode="reflect")
    with pytest.raises(NotImplementedError, match="return_indices"):
        nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(ValueError, match="strided convolutions"):
        nn.Conv2d(3, 3, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(X3)
    with pytest.raises(ValueError, match="expected 4-D input"):
        nn.Conv2d(3, 3, 3)(X3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(6)(X2[:1])
    with pytest.raises(ValueError, match="device 'cuda'"):
        nn.Linear(2, 2, device="cuda")
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


def test_eager_calls_reuse_the_resolved_op():
    conv = nn.Conv2d(3, 4, 3)
    conv(X4)
    size = len(_dispatch._CACHE)
    for _ in range(3):
        conv(X4)
    assert len(_dispatch._CACHE) == size
