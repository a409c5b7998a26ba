"""StringNormalizer, StringSplit, StringConcat and RegexFullMatch against plain Python."""

import re

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.testing import check_op, run_op


def strings(*values, shape=None):
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out.reshape(shape) if shape is not None else out


def normalizer_reference(x, action="NONE", sensitive=0, stops=()):
    words = list(x.reshape(-1))
    if sensitive:
        words = [w for w in words if w not in stops]
    else:
        folded = {s.casefold() for s in stops}
        words = [w for w in words if w.casefold() not in folded]
    words = [{"LOWER": w.lower(), "UPPER": w.upper()}.get(action, w) for w in words] or [""]
    y = strings(*words)
    return (y.reshape(1, -1) if x.ndim == 2 else y,)


@pytest.mark.parametrize(
    "x, attrs",
    [
        (strings("monday", "tuesday"), {"is_case_sensitive": 1}),
        (strings("monday", "Tuesday", "MONDAY"), {"stopwords": ["monday"]}),
        (strings("monday", "Tuesday", "MONDAY"), {"stopwords": ["monday"], "is_case_sensitive": 1}),
        (strings("a", "Straße", "b"), {"stopwords": ["STRASSE"], "case_change_action": "UPPER"}),
        (strings("Ab", "cD", shape=(1, 2)), {"case_change_action": "LOWER"}),
        (strings("x", "x", shape=(1, 2)), {"stopwords": ["X"]}),
        (strings("x", "x"), {"stopwords": ["x"], "case_change_action": "UPPER", "locale": "en_US"}),
        (strings("Élan", "ı"), {"case_change_action": "UPPER"}),
    ],
)
def test_string_normalizer(x, attrs):
    def reference(x):
        return normalizer_reference(
            x,
            attrs.get("case_change_action", "NONE"),
            attrs.get("is_case_sensitive", 0),
            attrs.get("stopwords", ()),
        )

    check_op("StringNormalizer", [x], reference, **attrs)


def test_string_normalizer_errors():
    with pytest.raises(OperatorError, match=r"\[C\] or \[1, C\]"):
        run_op("StringNormalizer", [strings("a", "b", shape=(2, 1))])
    with pytest.raises(OperatorError, match="case_change_action"):
        run_op("StringNormalizer", [strings("a")], case_change_action="TITLE")
    with pytest.raises(OperatorError, match="string tensor"):
        run_op("StringNormalizer", [np.zeros(3, np.float32)])


def split_reference(x, sep, maxsplit):
    pieces = [s.split(sep or None, -1 if maxsplit is None else maxsplit) for s in x.reshape(-1)]
    width = max((len(p) for p in pieces), default=0)
    y = np.full((len(pieces), width), "", dtype=object)
    for i, p in enumerate(pieces):
        y[i, : len(p)] = p
    z = np.array([len(p) for p in pieces], np.int64).reshape(x.shape)
    return y.reshape(*x.shape, width), z


@pytest.mark.parametrize(
    "x, sep, maxsplit",
    [
        (strings("a,b,c", "d,,e", "", shape=(3,)), ",", None),
        (strings("a  b \t c", "  lead", "none", shape=(1, 3)), None, None),
        (strings("a  b  c", "x y"), "", None),
        (strings("1-2-3-4", "5-6"), "-", 2),
        (strings("abcabc", "ab"), "bc", 0),
        (strings(shape=(0,)), ",", None),
        (strings("a b", "c", "d e f", "", shape=(2, 2)), " ", None),
    ],
)
def test_string_split(x, sep, maxsplit):
    attrs = {k: v for k, v in {"delimiter": sep, "maxsplit": maxsplit}.items() if v is not None}
    check_op("StringSplit", [x], lambda x: split_reference(x, sep, maxsplit), **attrs)


@pytest.mark.parametrize(
    "x, y",
    [
        (strings("a", "b"), strings("c", "d")),
        (strings("a", "b", "c", "d", shape=(2, 2)), strings("!", "?", shape=(1, 2))),
        (np.array("zero", dtype=object), np.array("dim", dtype=object)),
        (strings("", "ü"), strings("ß", "")),
        (np.array(["x", "y"]), np.array([b"1", b"2"], dtype=object)),  # U and bytes accepted
    ],
)
def test_string_concat(x, y):
    def reference(a, b):
        a, b = np.asarray(a).astype(str), np.asarray(b).astype(object)
        b = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else s, otypes=[object])(b)
        out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=object)
        out[...] = np.char.add(a, b.astype(str))
        return (out,)

    check_op("StringConcat", [x, y], reference)


def test_string_concat_errors():
    with pytest.raises(OperatorError, match="do not broadcast"):
        run_op("StringConcat", [strings("a", "b", "c"), strings("a", "b")])
    with pytest.raises(OperatorError, match="'Y'.*string tensor"):
        run_op("StringConcat", [strings("a"), np.ones(1)])


@pytest.mark.parametrize(
    "values, pattern",
    [
        (("www.google.com", "www.facebook.com", "www.bbc.co.uk"), r"www\.[\w.-]+\.\bcom\b"),
        (
            ("account@gmail.com", "account@hotmail.com", "not email"),
            r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)",
        ),
        ((), r"abc"),
        (("abc", "abcd", "ABC"), r"(?i)abc"),
        (("", "a"), r"a*"),
    ],
)
def test_regex_full_match(values, pattern):
    x = strings(*values, shape=(len(values),))
    regex = re.compile(pattern)

    def reference(x):
        return (np.array([regex.fullmatch(s) is not None for s in x], dtype=bool).reshape(x.shape),)

    check_op("RegexFullMatch", [x], reference, pattern=pattern)


def test_regex_full_match_errors():
    with pytest.raises(OperatorError, match="not a valid regex"):
        run_op("RegexFullMatch", [strings("a")], pattern="(")
    with pytest.raises(OperatorError, match="'pattern'"):
        run_op("RegexFullMatch", [strings("a")])
    (y,) = run_op("RegexFullMatch", [np.array([b"ab", b"b"], dtype=object)], pattern="a.")
    np.testing.assert_array_equal(y, [True, False])
