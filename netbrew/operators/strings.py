"""StringNormalizer, StringSplit, StringConcat and RegexFullMatch.

String tensors are NumPy object arrays of Python `str`; `bytes` elements (and NumPy `U`/`S`
arrays) are accepted and decoded as UTF-8. Outputs are always object arrays of `str`.

RegexFullMatch uses Python's `re` where ONNX specifies RE2 syntax. Patterns in the common
subset behave the same. Differences: Python accepts constructs RE2 rejects (backreferences
such as `\\1`, lookahead and lookbehind `(?=...)`, `(?<=...)`, atomic groups and possessive
quantifiers) and then may take exponential time, where RE2 guarantees linear time; RE2's
Unicode classes `\\pL` / `\\p{Greek}`, `\\C` and `(?<name>...)` are errors in Python, and
`(?U)` means ungreedy in RE2 but Unicode in Python. POSIX classes like `[[:alpha:]]` are
not classes in Python.

StringNormalizer changes case with Python's locale-independent Unicode rules (`str.lower`
and `str.upper`); the `locale` attribute is accepted and checked for shape but not applied,
so locale-specific casing (e.g. Turkish dotted i) follows the Unicode default.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.schema import kernel, no_gradient, schema


def as_text(x: np.ndarray, slot: str, op: str) -> np.ndarray:
    """`x` as an object array of str (bytes decoded as UTF-8); raises for other dtypes."""
    x = np.asarray(x)
    if x.dtype.kind not in "OUS":
        raise SchemaError(f"{op}: input {slot!r} has dtype {x.dtype}, expected a string tensor")
    out = np.empty(x.shape, dtype=object)
    flat = out.reshape(-1)
    for i, s in enumerate(x.reshape(-1).tolist()):
        if isinstance(s, bytes):
            try:
                s = s.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{op}: input {slot!r} element {i} is not UTF-8: {e}") from e
        elif not isinstance(s, str):
            raise SchemaError(
                f"{op}: input {slot!r} element {i} is a {type(s).__name__}, expected str"
            )
        flat[i] = s
    return out


schema(
    "StringNormalizer",
    inputs=["X"],
    outputs=["Y"],
    attrs={"case_change_action": "NONE", "is_case_sensitive": 0, "stopwords": None, "locale": None},
    doc="Y = X without elements equal to a stopword (compared case-insensitively unless "
    "is_case_sensitive=1), then case_change_action LOWER/UPPER/NONE (default NONE); X is [C] "
    "or [1, C]; Y is [K] or [1, K], [''] / [['']] when every element is dropped",
)


@kernel("StringNormalizer")
def string_normalizer_cpu(x, case_change_action, is_case_sensitive, stopwords, locale):
    op = "StringNormalizer"
    action = str(case_change_action).upper()
    if action not in ("NONE", "LOWER", "UPPER"):
        raise SchemaError(
            f"{op}: case_change_action={case_change_action!r}, expected NONE, LOWER or UPPER"
        )
    if locale is not None and not isinstance(locale, str):
        raise SchemaError(f"{op}: locale must be a string such as 'en_US', got {locale!r}")
    x = as_text(x, "X", op)
    if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
        raise ShapeError(f"{op}: input 'X' has shape {list(x.shape)}, expected [C] or [1, C]")
    words = x.reshape(-1).tolist()
    stops = [s.decode() if isinstance(s, bytes) else str(s) for s in (stopwords or [])]
    if stops:
        if is_case_sensitive:
            stop_set = set(stops)
            words = [w for w in words if w not in stop_set]
        else:
            stop_set = {s.casefold() for s in stops}
            words = [w for w in words if w.casefold() not in stop_set]
    if action == "LOWER":
        words = [w.lower() for w in words]
    elif action == "UPPER":
        words = [w.upper() for w in words]
    if not words:
        words = [""]
    y = np.empty(len(words), dtype=object)
    y[:] = words
    return (y.reshape(1, -1) if x.ndim == 2 else y,)


schema(
    "StringSplit",
    inputs=["X"],
    outputs=["Y", "Z"],
    attrs={"delimiter": None, "maxsplit": None},
    doc="Y[..., k] = k-th piece of X split on delimiter (unset or '': runs of whitespace, "
    "trimmed), at most maxsplit splits (unset: all), padded with '' to the longest; "
    "Z = number of pieces (int64); Y is X.shape + [max pieces], Z is X.shape",
)


@kernel("StringSplit")
def string_split_cpu(x, delimiter, maxsplit):
    op = "StringSplit"
    x = as_text(x, "X", op)
    sep = delimiter.decode() if isinstance(delimiter, bytes) else delimiter
    sep = sep or None
    limit = -1 if maxsplit is None else int(maxsplit)
    if limit < -1:
        raise SchemaError(f"{op}: maxsplit={maxsplit} must be >= 0")
    pieces = [s.split(sep, limit) for s in x.reshape(-1).tolist()]
    counts = np.array([len(p) for p in pieces], dtype=np.int64).reshape(x.shape)
    width = int(counts.max(initial=0))
    y = np.full((len(pieces), width), "", dtype=object)
    for i, p in enumerate(pieces):
        y[i, : len(p)] = p
    return y.reshape(*x.shape, width), counts


schema(
    "StringConcat",
    inputs=["X", "Y"],
    outputs=["Z"],
    doc="Z = X + Y, string concatenation elementwise with NumPy broadcasting",
)


@kernel("StringConcat")
def string_concat_cpu(x, y):
    a, b = as_text(x, "X", "StringConcat"), as_text(y, "Y", "StringConcat")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ShapeError(
            f"StringConcat: inputs 'X' {list(a.shape)} and 'Y' {list(b.shape)} do not broadcast"
        ) from None
    out = np.empty(shape, dtype=object)
    out[...] = np.add(a, b, dtype=object)  # object arrays add with Python's str +
    return (out,)


schema(
    "RegexFullMatch",
    inputs=["X"],
    outputs=["Y"],
    attrs={"pattern": None},
    doc="Y = whether the whole of each element of X matches pattern (bool, X's shape); "
    "Python re syntax standing in for RE2 (see the module doc for the differences)",
)


@functools.lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"RegexFullMatch: pattern {pattern!r} is not a valid regex: {e}") from e


@kernel("RegexFullMatch")
def regex_full_match_cpu(x, pattern):
    if pattern is None:
        raise SchemaError("RegexFullMatch: the 'pattern' attribute is required")
    if isinstance(pattern, bytes):
        pattern = pattern.decode()
    regex = _compile(pattern)
    x = as_text(x, "X", "RegexFullMatch")
    hits = [regex.fullmatch(s) is not None for s in x.reshape(-1).tolist()]
    return (np.array(hits, dtype=np.bool_).reshape(x.shape),)


for _op in ("StringNormalizer", "StringSplit", "StringConcat", "RegexFullMatch"):
    no_gradient(_op, "string tensors have no gradient")
