"""Allocation limits: ops that size their output from arguments or data check here first."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from netbrew.errors import ShapeError

MAX_ELEMENTS = int(os.environ.get("NETBREW_MAX_ELEMENTS", 2**31))
"""Largest tensor (in elements) an op may allocate from a requested shape.

Override with the NETBREW_MAX_ELEMENTS environment variable or by setting this attribute.
"""


def check_numel(shape: Iterable[int], what: str) -> tuple[int, ...]:
    """Returns `shape` as a tuple after checking it is valid and within MAX_ELEMENTS.

    Args:
        shape: the requested dimensions.
        what: who asks, for the message (e.g. "ConstantFill shape").
    """
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ShapeError(f"{what} {list(dims)} has a negative dimension")
    count = math.prod(dims)
    limit = MAX_ELEMENTS
    if count > limit:
        raise ShapeError(
            f"{what} {list(dims)} asks for {count:,} elements, over the limit of {limit:,} "
            "(raise netbrew.operators.limits.MAX_ELEMENTS if this is intended)"
        )
    return dims
