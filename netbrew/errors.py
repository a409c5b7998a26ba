"""The few exception types netbrew raises.

Every message says what failed, names the op, blob, file or argument, and gives what
was expected beside what was received.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class NetbrewError(Exception):
    """Base class of netbrew's errors."""


class UnknownOperatorError(NetbrewError, KeyError):
    """An op type (or another registry key) that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownOpAttributeError(UnknownOperatorError, AttributeError):
    """`net.Foo` where Foo is no registered op: an UnknownOperatorError (with near names)
    that is also an AttributeError, so hasattr(net, "Foo") and getattr(net, "Foo", None)
    answer instead of raising."""


class SchemaError(NetbrewError, ValueError):
    """An op does not match its schema: arity, attributes, dtypes or in-place use."""


class ShapeError(NetbrewError, ValueError):
    """A kernel got inputs whose shapes or ranks it cannot use."""


class OperatorError(NetbrewError, RuntimeError):
    """A kernel failed while a net ran. The message carries the op's context."""


class ModelLoadError(NetbrewError, ValueError):
    """A model or tensor file is missing, empty, truncated or not what it claims to be."""


class FeedError(NetbrewError, ValueError):
    """A Predictor got a missing, unexpected or wrongly typed feed."""


class BlobNotFoundError(NetbrewError, KeyError):
    """A blob that is not in the workspace."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsupportedConversion(NetbrewError, NotImplementedError):
    """A converter met something it cannot express in the target format."""


def suggest(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """Returns ' Did you mean: A, B?' for the nearest candidates, or ''."""
    pool = list(candidates)
    close = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in pool}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), lowered, n=n)]
    return f" Did you mean: {', '.join(close)}?" if close else ""


class DeviceFallbackWarning(UserWarning):
    """Ops or blobs that asked for a device netbrew cannot use here (a GPU where none is
    present) run on the CPU instead; one warning says how many and where."""
