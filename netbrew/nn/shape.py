"""Dropout and Flatten modules."""

from __future__ import annotations

from typing import Any

from netbrew.nn import functional as F
from netbrew.nn.module import Module


class Dropout(Module):
    """In training, zeroes each element with probability p and scales the rest by
    1 / (1 - p) (Dropout with ratio and training_mode inputs); in eval, Dropout in
    inference mode (the identity). The random stream is netbrew.nn's (manual_seed)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Any) -> Any:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    """Merges dims start_dim..end_dim (Flatten for start_dim=1, end_dim=-1, else Reshape)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Any) -> Any:
        return F.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
