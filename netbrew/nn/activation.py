"""ReLU, GELU, Sigmoid, Tanh and Softmax modules."""

from __future__ import annotations

from typing import Any

from netbrew.nn import functional as F
from netbrew.nn.module import Module


class ReLU(Module):
    """max(x, 0) (Relu). `inplace` is accepted for PyTorch compatibility; results are new
    arrays."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.relu(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """x * Phi(x), exact (approximate='none') or with the tanh approximation (Gelu)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Any) -> Any:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """1 / (1 + exp(-x)) (Sigmoid)."""

    def forward(self, input: Any) -> Any:
        return F.sigmoid(input)


class Tanh(Module):
    """tanh(x) (Tanh)."""

    def forward(self, input: Any) -> Any:
        return F.tanh(input)


class Softmax(Module):
    """exp(x) / sum(exp(x)) along `dim` (Softmax). dim=None takes PyTorch's legacy choice
    (0 for 0-, 1- and 3-D input, else 1)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:
        return F.softmax(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
