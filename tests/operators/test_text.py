"""TfIdfVectorizer against a brute-force n-gram counter."""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, run_op


def tfidf_reference(x, mode, lo, hi, skips, counts, indexes, pool, weights=None):
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    width = max(indexes) + 1
    grams, number = [], 0
    for n, start in enumerate(counts, start=1):
        end = counts[n] if n < len(counts) else len(pool)
        for k in range((end - start) // n):
            if lo <= n <= hi:
                grams.append((tuple(pool[start + k * n : start + (k + 1) * n]), indexes[number]))
            number += 1
    y = np.zeros((len(rows), width))
    for b, row in enumerate(rows.tolist()):
        for gram, col in grams:
            n = len(gram)
            for step in range(1, (skips + 1 if n > 1 else 1) + 1):
                for j in range(len(row) - (n - 1) * step):
                    if tuple(row[j : j + (n - 1) * step + 1 : step]) == gram:
                        y[b, col] += 1
    w = np.ones(width) if weights is None else np.asarray(weights)
    if mode == "IDF":
        y = (y > 0) * w
    elif mode == "TFIDF":
        y = y * w
    y = y.astype(np.float32)
    return (y.reshape(width) if x.ndim == 1 else y,)


def run_case(x, mode, lo, hi, skips, counts, indexes, pool, weights=None):
    attrs = dict(
        mode=mode,
        min_gram_length=lo,
        max_gram_length=hi,
        max_skip_count=skips,
        ngram_counts=counts,
        ngram_indexes=indexes,
    )
    attrs["pool_strings" if isinstance(pool[0], str) else "pool_int64s"] = pool
    if weights is not None:
        attrs["weights"] = weights

    def reference(x):
        return tfidf_reference(x, mode, lo, hi, skips, counts, indexes, pool, weights)

    check_op("TfIdfVectorizer", [x], reference, **attrs)


BIGRAM_POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7]  # 4 unigrams, 3 bigrams
ROW = np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], np.int32)


@pytest.mark.parametrize(
    "x, lo, hi, skips, counts",
    [
        (ROW, 2, 2, 0, [0, 4]),
        (ROW, 2, 2, 5, [0, 4]),
        (ROW, 1, 2, 5, [0, 4]),
        (ROW.reshape(2, 6), 1, 2, 5, [0, 4]),
        (ROW.reshape(2, 6).astype(np.int64), 1, 1, 3, [0, 4]),
        (ROW, 2, 2, 0, [0, 0]),  # no unigrams in the pool: the first level is empty
        (np.zeros((0, 4), np.int64), 1, 2, 1, [0, 4]),
    ],
)
def test_tfidf_int_tf(x, lo, hi, skips, counts):
    pool = BIGRAM_POOL if counts[1] else [5, 6, 7, 8, 6, 7]
    run_case(x, "TF", lo, hi, skips, counts, list(range(7 if counts[1] else 3)), pool)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("seed", [0, 1])
def test_tfidf_random_int(mode, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=(3, 15)).astype(np.int64)
    pool = [0, 1, 2, 3, 0, 1, 1, 0, 2, 2, 4, 5, 0, 1, 2, 2, 2, 2]  # 4 uni, 4 bi, 2 tri
    indexes = rng.permutation(10).tolist()
    weights = rng.uniform(0.5, 2.0, 10).round(2).tolist() if mode != "TF" else None
    run_case(x, mode, 1, 3, 2, [0, 4, 12], indexes, pool, weights)


def test_tfidf_strings_and_weights():
    x = np.array(["a", "b", "a", "c", "a", "b", "zz"], dtype=object)
    pool = ["a", "b", "c", "a", "b", "b", "a"]
    run_case(x, "TFIDF", 1, 2, 1, [0, 3], [0, 1, 2, 3, 4], pool, [0.5, 1, 2, 3, 4])
    run_case(x.reshape(1, -1), "IDF", 1, 2, 0, [0, 3], [4, 3, 2, 1, 0], pool)


def test_tfidf_errors():
    base = dict(mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
                ngram_counts=[0], ngram_indexes=[0])  # fmt: skip
    with pytest.raises(OperatorError, match="exactly one of pool_int64s"):
        run_op("TfIdfVectorizer", [ROW], **base)
    with pytest.raises(OperatorError, match="int32 or int64"):
        run_op("TfIdfVectorizer", [ROW.astype(np.float32)], pool_int64s=[1], **base)
    with pytest.raises(OperatorError, match="mode="):
        run_op("TfIdfVectorizer", [ROW], pool_int64s=[1], **{**base, "mode": "BM25"})
    with pytest.raises(OperatorError, match="whole 2-grams"):
        run_op("TfIdfVectorizer", [ROW], pool_int64s=[1, 2, 3],
               **{**base, "ngram_counts": [0, 0], "max_gram_length": 2})  # fmt: skip
    with pytest.raises(OperatorError, match=r"\[C\] or \[B, C\]"):
        run_op("TfIdfVectorizer", [ROW.reshape(2, 2, 3)], pool_int64s=[1], **base)
