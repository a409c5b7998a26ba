"""BatchNorm1d/2d/3d and LayerNorm."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.nn import functional as F
from netbrew.nn import init
from netbrew.nn.linear import check_device, empty
from netbrew.nn.module import Module


def _affine(module: Module, shape: tuple[int, ...], dtype: Any, affine: bool, bias: bool) -> None:
    """Parameters weight (ones) and bias (zeros) of `shape`, each None where left out."""
    module.register_parameter("weight", init.ones_(empty(shape, dtype)) if affine else None)
    module.register_parameter("bias", init.zeros_(empty(shape, dtype)) if affine and bias else None)


class _BatchNorm(Module):
    """Batch normalization over dim 1 (BatchNormalization), PyTorch's semantics.

    Parameters weight (ones) and bias (zeros) when affine; buffers running_mean (zeros),
    running_var (ones) and num_batches_tracked (int64 0) when track_running_stats. In
    training the batch statistics normalise and the buffers update as PyTorch's:
    running = (1 - momentum) * running + momentum * batch (unbiased variance), and
    num_batches_tracked counts the batches. momentum=None (cumulative average) uses
    num_batches_tracked as a number, which tracing freezes (see trace).
    """

    ranks: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        check_device(device)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine(self, (num_features,), dtype, affine, bias)
        stat_dtype = np.float32 if dtype is None else dtype
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, stat_dtype))
            self.register_buffer("running_var", np.ones(num_features, stat_dtype))
            self.register_buffer("num_batches_tracked", np.array(0, np.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean[...] = 0
            self.running_var[...] = 1
            self.num_batches_tracked[...] = 0

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Any) -> Any:
        if input.ndim not in self.ranks:
            want = " or ".join(f"{r}D" for r in self.ranks)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked += 1  # None: a converted NetDef's layer, which has none
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or self.running_mean is None
        keep = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep else None,
            self.running_var if keep else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L)."""

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W)."""

    ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W)."""

    ranks = (5,)


class LayerNorm(Module):
    """Normalizes over the trailing dims `normalized_shape` (LayerNormalization).

    weight (ones) and bias (zeros), shaped normalized_shape, when elementwise_affine.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_device(device)
        if isinstance(normalized_shape, (int, np.integer)):
            normalized_shape = (int(normalized_shape),)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine(self, self.normalized_shape, dtype, elementwise_affine, bias)

    def forward(self, input: Any) -> Any:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )
