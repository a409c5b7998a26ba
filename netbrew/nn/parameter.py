"""Parameter: an ndarray that a Module registers as a trainable weight."""

from __future__ import annotations

from typing import Any

import numpy as np


class Parameter(np.ndarray):
    """A module weight: a NumPy array (float32 by default) flagged `requires_grad`.

    Setting a Parameter as a Module attribute registers it, as in PyTorch. It is an
    ndarray subclass, so eager code uses it like any array; arithmetic on it gives plain
    ndarrays. `param.data` is a plain view of the same memory.

    Args:
        data: the values (anything np.asarray takes); None gives an empty array.
        requires_grad: whether training updates it (traced models tag it WEIGHT/BIAS);
            False marks a frozen parameter.
        dtype: the dtype; None means float32, except that float16 data stays float16.

    Example:
        >>> w = Parameter(np.zeros((3, 4)))
        >>> w.dtype, w.shape, w.requires_grad
        (dtype('float32'), (3, 4), True)
    """

    requires_grad: bool

    def __new__(cls, data: Any = None, requires_grad: bool = True, dtype: Any = None) -> Parameter:
        array = np.asarray([] if data is None else data)
        if dtype is None:
            dtype = array.dtype if array.dtype == np.float16 else np.float32
        obj = np.array(array, dtype=dtype, copy=True).view(cls)
        obj.requires_grad = bool(requires_grad)
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.requires_grad = getattr(obj, "requires_grad", True)

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """Computes on plain views, so `param * 2` is an ndarray, not a Parameter."""
        inputs = tuple(i.view(np.ndarray) if isinstance(i, Parameter) else i for i in inputs)
        if out is not None:
            kwargs["out"] = tuple(
                o.view(np.ndarray) if isinstance(o, Parameter) else o for o in out
            )
        return getattr(ufunc, method)(*inputs, **kwargs)

    @property
    def data(self) -> np.ndarray:
        """The values as a plain ndarray sharing this parameter's memory."""
        return self.view(np.ndarray)

    def __repr__(self) -> str:
        return f"Parameter containing:\n{np.array_repr(self.view(np.ndarray))}"
