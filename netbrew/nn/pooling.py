"""MaxPool2d, AvgPool2d and AdaptiveAvgPool2d."""

from __future__ import annotations

from typing import Any

from netbrew.nn import functional as F
from netbrew.nn.module import Module


class MaxPool2d(Module):
    """Max over kernel_size windows (MaxPool); stride defaults to kernel_size.

    return_indices=True is not supported (MaxPool's indices are not PyTorch's).
    """

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        if return_indices:
            raise NotImplementedError(
                "MaxPool2d: return_indices=True is not supported (MaxPool's Indices index the "
                "whole tensor, not each plane as PyTorch's do)"
            )
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Any) -> Any:
        return F.max_pool2d(
            input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class AvgPool2d(Module):
    """Mean over kernel_size windows (AveragePool); pads count in the divisor unless
    count_include_pad=False. divisor_override is not supported."""

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        if divisor_override is not None:
            raise NotImplementedError("AvgPool2d: divisor_override is not supported")
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Any) -> Any:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Mean pooling to output_size: 1 or (1, 1) is GlobalAveragePool; sizes that divide the
    input evenly are AveragePool; other sizes raise ValueError when called."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,)
        if len(sizes) not in (1, 2) or any(s is not None and int(s) <= 0 for s in sizes):
            raise ValueError(f"AdaptiveAvgPool2d: invalid output_size {output_size!r}")
        self.output_size = output_size

    def forward(self, input: Any) -> Any:
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
