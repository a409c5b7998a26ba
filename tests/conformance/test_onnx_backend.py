"""ONNX's backend conformance suite (onnx.backend.test.BackendTest) against netbrew.

Every CPU test runs. The ones listed in expected_failures.txt, each with its reason,
are marked as expected failures, so CI stays green and a regression fails; a listed
test that starts passing fails too (an unexpected success), so the list only shrinks.
Listed tests of random draws ("random:" reasons) may pass by chance, and are not strict.
Report with: python -m netbrew.converters.onnx.conformance
"""

import re
import warnings
from pathlib import Path

import onnx.backend.test
import pytest

from netbrew.converters.onnx.backend import NetbrewBackend


def expected_failures() -> dict[str, str]:
    """test name -> reason, from expected_failures.txt ("name  # reason" per line)."""
    entries = {}
    for line in (Path(__file__).parent / "expected_failures.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, reason = line.partition("#")
        assert reason.strip(), f"expected failure {name.strip()!r} needs a reason"
        entries[name.strip()] = reason.strip()
    return entries


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(NetbrewBackend, __name__)
backend_test.include(r".*_cpu$")
RANDOM = "random:"
_expected = expected_failures()
_random = {n: r for n, r in _expected.items() if r.startswith(RANDOM)}
for _name in _expected.keys() - _random.keys():
    backend_test.xfail(f"^{re.escape(_name)}$")


def _mark_random(cases: dict, random: dict[str, str]) -> None:
    """Marks the tests of random draws as expected failures that may pass."""
    for case in cases.values():
        for name, reason in random.items():
            if hasattr(case, name):
                test = pytest.mark.xfail(reason=reason, strict=False)(getattr(case, name))
                setattr(case, name, test)


_mark_random(backend_test.test_cases, _random)
globals().update(backend_test.test_cases)
