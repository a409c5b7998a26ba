"""Conv1d/2d/3d and ConvTranspose1d/2d/3d, with PyTorch's arguments, defaults and init."""

from __future__ import annotations

from typing import Any

from netbrew.nn import functional as F
from netbrew.nn import init
from netbrew.nn.functional import ntuple
from netbrew.nn.linear import check_device, empty
from netbrew.nn.module import Module


class _ConvNd(Module):
    """What the convolutions share: checks, parameters, PyTorch's init and printing."""

    transposed = False

    def __init__(
        self,
        n: int,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        groups: int,
        bias: bool,
        padding_mode: str,
        output_padding: Any = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        check_device(device)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise NotImplementedError(
                f"padding_mode={padding_mode!r} is not supported; only 'zeros' has a registry op"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = ntuple(kernel_size, n, "kernel_size")
        self.stride = ntuple(stride, n, "stride")
        self.dilation = ntuple(dilation, n, "dilation")
        self.output_padding = ntuple(output_padding, n, "output_padding")
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of valid, same"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = ntuple(padding, n, "padding")
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = empty(shape, dtype)
        if bias:
            self.bias = empty((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.reset_weight_and_bias_(self.weight, self.bias, draw_empty_bias=False)

    def extra_repr(self) -> str:
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if isinstance(self.padding, str) or any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class _Conv(_ConvNd):
    """Convolution over (N, C_in, *spatial): weight (C_out, C_in / groups, *kernel) (Conv).

    padding may be ints, 'valid' or 'same' (emitted as explicit pads, the extra one at the
    end as PyTorch). Weight and bias start uniform in +-1/sqrt(fan_in) like PyTorch's.
    """

    rank = 0
    function: Any = None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            self.rank, in_channels, out_channels, kernel_size, stride, padding, dilation,
            groups, bias, padding_mode, device=device, dtype=dtype,
        )  # fmt: skip

    def forward(self, input: Any) -> Any:
        return type(self).function(
            input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )


class Conv1d(_Conv):
    """1-D convolution of (N, C_in, L); weight (C_out, C_in / groups, k)."""

    rank, function = 1, F.conv1d


class Conv2d(_Conv):
    """2-D convolution of (N, C_in, H, W); weight (C_out, C_in / groups, kH, kW)."""

    rank, function = 2, F.conv2d


class Conv3d(_Conv):
    """3-D convolution of (N, C_in, D, H, W); weight (C_out, C_in / groups, kD, kH, kW)."""

    rank, function = 3, F.conv3d


class _ConvTranspose(_ConvNd):
    """Transposed convolution: weight (C_in, C_out / groups, *kernel) (ConvTranspose).

    forward(input, output_size=None): output_size (the spatial sizes, optionally after
    N and C) picks the output_padding that reaches it, as PyTorch.
    """

    transposed = True
    rank = 0
    function: Any = None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Any,
        stride: Any = 1,
        padding: Any = 0,
        output_padding: Any = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Any = 1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        if isinstance(padding, str):
            raise ValueError(
                f"padding must be an int or a tuple for {type(self).__name__}, not a string"
            )
        super().__init__(
            self.rank, in_channels, out_channels, kernel_size, stride, padding, dilation,
            groups, bias, padding_mode, output_padding, device=device, dtype=dtype,
        )  # fmt: skip
        for p, s, d in zip(self.output_padding, self.stride, self.dilation):
            if p >= max(s, d):
                raise ValueError("output padding must be smaller than either stride or dilation")

    def _output_padding(self, input: Any, output_size: Any) -> tuple[int, ...]:
        if output_size is None:
            return self.output_padding
        n = self.rank
        size = tuple(int(s) for s in output_size)[-n:]
        pads = []
        for d in range(n):
            low = (
                (input.shape[d + 2] - 1) * self.stride[d]
                - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1)
                + 1
            )
            high = low + max(self.stride[d], self.dilation[d]) - 1
            if not low <= size[d] <= high:
                raise ValueError(
                    f"requested an output size of {list(size)}, but valid sizes range from "
                    f"{low} to {high} in dim {d} (for an input of {list(input.shape[2:])})"
                )
            pads.append(size[d] - low)
        return tuple(pads)

    def forward(self, input: Any, output_size: Any = None) -> Any:
        return type(self).function(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution of (N, C_in, L)."""

    rank, function = 1, F.conv_transpose1d


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution of (N, C_in, H, W)."""

    rank, function = 2, F.conv_transpose2d


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution of (N, C_in, D, H, W)."""

    rank, function = 3, F.conv_transpose3d
