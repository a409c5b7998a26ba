"""Identity, Linear and Embedding layers."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.nn import functional as F
from netbrew.nn import init
from netbrew.nn.module import Module
from netbrew.nn.parameter import Parameter


def check_device(device: Any) -> None:
    """Layers take PyTorch's `device` argument; only the CPU exists here."""
    if device not in (None, "cpu"):
        raise ValueError(f"device {device!r} is not supported: netbrew.nn modules run on 'cpu'")


def empty(shape: tuple[int, ...], dtype: Any) -> Parameter:
    return Parameter(np.zeros(shape), dtype=np.float32 if dtype is None else dtype)


class Identity(Module):
    """Returns its input; takes and ignores any arguments, as PyTorch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Linear(Module):
    """y = x W^T + b over the last dim.

    weight (out_features, in_features) and bias (out_features,) start uniform in
    +-1/sqrt(in_features) (PyTorch's kaiming_uniform_(a=sqrt(5)) and bias rule).
    Emits Gemm(transB=1) for 2-D input, MatMul + Add otherwise.
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__()
        check_device(device)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = empty((out_features, in_features), dtype)
        if bias:
            self.bias = empty((out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.reset_weight_and_bias_(self.weight, self.bias)

    def forward(self, input: Any) -> Any:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class Embedding(Module):
    """A lookup table: row i of weight (num_embeddings, embedding_dim) for index i.

    weight starts Normal(0, 1), with row padding_idx zeroed (PyTorch's init). Gradients
    (through Gather's) also reach the padding row; max_norm, scale_grad_by_freq and sparse
    are not supported.
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Any = None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        check_device(device)
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError(
                "Embedding: max_norm, scale_grad_by_freq and sparse are not supported"
            )
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        shape = (num_embeddings, embedding_dim)
        if _weight is None:
            self.weight = empty(shape, dtype)
            self.reset_parameters()
        else:
            if tuple(np.shape(_weight)) != shape:
                raise ValueError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze, dtype=dtype)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight[self.padding_idx] = 0

    def forward(self, input: Any) -> Any:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s
