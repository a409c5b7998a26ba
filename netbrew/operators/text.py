"""TfIdfVectorizer: n-gram counts (with skips) of int or string token rows.

The pool holds the n-grams to count, grouped by size: `ngram_counts[n-1]` is where the
n-grams of size n start in pool_int64s / pool_strings. The i-th pool n-gram (over all
sizes, in pool order) is counted into output column `ngram_indexes[i]`. An n-gram of size
n >= 2 with skip s takes tokens j, j + (s+1), ..., j + (n-1)(s+1); every s in
[0, max_skip_count] is counted, unigrams once. As in onnxruntime and ONNX's reference,
`weights` are indexed by output column (the same as by pool n-gram when ngram_indexes is
0, 1, 2, ...).
"""

from __future__ import annotations

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.limits import check_numel
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema
from netbrew.operators.strings import as_text

schema(
    "TfIdfVectorizer",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        "mode": REQUIRED,
        "min_gram_length": REQUIRED,
        "max_gram_length": REQUIRED,
        "max_skip_count": REQUIRED,
        "ngram_counts": REQUIRED,
        "ngram_indexes": REQUIRED,
        "pool_int64s": None,
        "pool_strings": None,
        "weights": None,
    },
    doc="Y[b, ngram_indexes[i]] = count of pool n-gram i in row X[b] (sizes min_gram_length.."
    "max_gram_length, skips 0..max_skip_count); mode TF: counts, IDF: weights where count > 0 "
    "(1 without weights), TFIDF: counts * weights; X [C] or [B, C] (int32/int64 with "
    "pool_int64s, string with pool_strings); Y float32 [max(ngram_indexes)+1] or [B, ...]",
)


def _pool_grams(pool: list, counts: list, low: int, high: int):
    """[(n, grams [k, n] of token ids, pool n-gram numbers [k])] for sizes low..high."""
    out, number = [], 0
    for n, start in enumerate(counts, start=1):
        end = counts[n] if n < len(counts) else len(pool)
        if start < 0 or end > len(pool) or start > end or (end - start) % n:
            raise SchemaError(
                f"TfIdfVectorizer: ngram_counts={counts} does not split a pool of "
                f"{len(pool)} items into whole {n}-grams at [{start}, {end})"
            )
        k = (end - start) // n
        if low <= n <= high and k:
            grams = np.asarray(pool[start:end], dtype=np.int64).reshape(k, n)
            out.append((n, grams, np.arange(number, number + k)))
        number += k
    return out, number


def _codes(ids: np.ndarray, base: int) -> np.ndarray:
    """Mixed-radix code of each row of token ids; Python ints when int64 could overflow."""
    n = ids.shape[-1]
    if base**n >= 2**62:
        ids = ids.astype(object)
    code = ids[..., 0]
    for k in range(1, n):
        code = code * base + ids[..., k]
    return code


@kernel("TfIdfVectorizer")
def tfidf_vectorizer_cpu(
    x,
    mode,
    min_gram_length,
    max_gram_length,
    max_skip_count,
    ngram_counts,
    ngram_indexes,
    pool_int64s,
    pool_strings,
    weights,
):
    op = "TfIdfVectorizer"
    mode = str(mode).upper()
    if mode not in ("TF", "IDF", "TFIDF"):
        raise SchemaError(f"{op}: mode={mode!r}, expected TF, IDF or TFIDF")
    if (pool_int64s is None) == (pool_strings is None):
        raise SchemaError(f"{op}: set exactly one of pool_int64s and pool_strings")
    if not 1 <= min_gram_length <= max_gram_length or max_skip_count < 0:
        raise SchemaError(
            f"{op}: need 1 <= min_gram_length ({min_gram_length}) <= max_gram_length "
            f"({max_gram_length}) and max_skip_count ({max_skip_count}) >= 0"
        )
    indexes = np.asarray(ngram_indexes, dtype=np.int64).reshape(-1)
    if indexes.size == 0 or indexes.min() < 0:
        raise SchemaError(f"{op}: ngram_indexes must be non-empty and >= 0")
    width = int(indexes.max()) + 1
    if x.ndim not in (1, 2):
        raise ShapeError(f"{op}: input 'X' has shape {list(x.shape)}, expected [C] or [B, C]")
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    check_numel((rows.shape[0], width), f"{op} output")

    # Tokens become ids into the pool's vocabulary; -1 marks tokens outside it.
    if pool_strings is not None:
        tokens = as_text(rows, "X", op)
        vocab = {}
        for s in pool_strings:
            vocab.setdefault(s.decode() if isinstance(s, bytes) else s, len(vocab))
        pool = [vocab[s.decode() if isinstance(s, bytes) else s] for s in pool_strings]
        ids = np.array([vocab.get(t, -1) for t in tokens.reshape(-1).tolist()], dtype=np.int64)
        ids, base = ids.reshape(rows.shape), len(vocab)
    else:
        if rows.dtype.kind not in "iu":
            raise SchemaError(
                f"{op}: input 'X' has dtype {rows.dtype}; with pool_int64s it must be int32 "
                "or int64 (use pool_strings for string input)"
            )
        values, pool = np.unique(np.asarray(pool_int64s, np.int64), return_inverse=True)
        pool = pool.reshape(-1).tolist()
        pos = np.searchsorted(values, rows).clip(0, max(len(values) - 1, 0))
        found = values[pos] == rows if len(values) else np.zeros(rows.shape, bool)
        ids, base = np.where(found, pos, -1).astype(np.int64), len(values)

    groups, total = _pool_grams(pool, list(ngram_counts), min_gram_length, max_gram_length)
    if indexes.size < total:
        raise SchemaError(f"{op}: {total} pool n-grams but only {indexes.size} ngram_indexes")
    counts = np.zeros((rows.shape[0], width), dtype=np.int64)
    length = rows.shape[1]
    for n, grams, numbers in groups:
        pool_codes = _codes(grams, base)
        order = np.argsort(pool_codes, kind="stable")
        sorted_codes, columns = pool_codes[order], indexes[numbers[order]]
        for step in range(1, (max_skip_count + 1 if n > 1 else 1) + 1):
            span = (n - 1) * step
            if span >= length:
                break
            starts = np.arange(length - span)
            windows = ids[:, starts[:, None] + step * np.arange(n)]  # [B, W, n]
            valid = (windows >= 0).all(axis=-1)
            codes = _codes(np.where(windows < 0, 0, windows), base)
            at = np.searchsorted(sorted_codes, codes, side="right") - 1
            hit = valid & (at >= 0)
            hit[hit] = sorted_codes[at[hit]] == codes[hit]  # duplicates: the last one counts
            row = np.broadcast_to(np.arange(rows.shape[0])[:, None], hit.shape)
            np.add.at(counts, (row[hit], columns[at[hit]]), 1)

    if mode == "TF":
        y = counts.astype(np.float32)
    else:
        w = np.ones(width, np.float32) if weights is None else np.asarray(weights, np.float32)
        if w.size < width:
            raise SchemaError(f"{op}: {w.size} weights for {width} output columns")
        base_values = (counts > 0) if mode == "IDF" else counts
        y = (base_values * w[:width]).astype(np.float32)
    return (y.reshape(width) if x.ndim == 1 else y,)


no_gradient("TfIdfVectorizer", "n-gram counts of integer or string tokens are not differentiable")
