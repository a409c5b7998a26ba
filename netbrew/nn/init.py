"""Parameter initialisation, as torch.nn.init: in-place fills from netbrew.nn's random stream.

The layers use PyTorch's schemes (Linear and Conv: kaiming_uniform_ with a=sqrt(5) for the
weight, uniform in +-1/sqrt(fan_in) for the bias), so freshly built netbrew.nn and torch.nn
layers draw from the same distributions; `netbrew.nn.manual_seed` makes them repeatable.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.nn._dispatch import generator


def calculate_fan_in_and_fan_out(array: np.ndarray) -> tuple[int, int]:
    """fan_in = shape[1] * receptive field, fan_out = shape[0] * receptive field (PyTorch's
    rule, also for ConvTranspose weights, whose dim 1 is the output channels per group)."""
    if array.ndim < 2:
        raise ValueError(
            f"fan in and fan out need an array of at least 2 dims, got shape {list(array.shape)}"
        )
    receptive = math.prod(array.shape[2:])
    return array.shape[1] * receptive, array.shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope**2))
    raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")


def uniform_(array: np.ndarray, a: float = 0.0, b: float = 1.0) -> np.ndarray:
    """Fills `array` with Uniform[a, b) draws; returns it."""
    array[...] = generator().uniform(a, b, size=array.shape)
    return array


def normal_(array: np.ndarray, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """Fills `array` with Normal(mean, std) draws; returns it."""
    array[...] = generator().normal(mean, std, size=array.shape)
    return array


def constant_(array: np.ndarray, value: float) -> np.ndarray:
    array[...] = value
    return array


def zeros_(array: np.ndarray) -> np.ndarray:
    return constant_(array, 0.0)


def ones_(array: np.ndarray) -> np.ndarray:
    return constant_(array, 1.0)


def kaiming_uniform_(
    array: np.ndarray,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
) -> np.ndarray:
    """Uniform in +-gain * sqrt(3 / fan), PyTorch's He initialisation."""
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} is not supported; use 'fan_in' or 'fan_out'")
    fan_in, fan_out = calculate_fan_in_and_fan_out(array)
    fan = fan_in if mode == "fan_in" else fan_out
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(array, -bound, bound)


def xavier_uniform_(array: np.ndarray, gain: float = 1.0) -> np.ndarray:
    """Uniform in +-gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = calculate_fan_in_and_fan_out(array)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(array, -bound, bound)


def reset_weight_and_bias_(
    weight: np.ndarray, bias: np.ndarray | None, *, draw_empty_bias: bool = True
) -> None:
    """PyTorch's default init of Linear and Conv layers: kaiming_uniform_(a=sqrt(5)) for the
    weight, Uniform[-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.

    With fan_in 0 the bias stays zero; Linear still draws it (draw_empty_bias=True, moving
    the random stream as torch's Linear does), the convolutions skip the draw as torch's.
    """
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is None:
        return
    fan_in, _ = calculate_fan_in_and_fan_out(weight)
    if fan_in > 0 or draw_empty_bias:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
