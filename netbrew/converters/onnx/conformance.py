"""Run ONNX's backend test suite against netbrew and report the results.

    python -m netbrew.converters.onnx.conformance            # every CPU test
    python -m netbrew.converters.onnx.conformance -k conv    # names containing "conv"
    python -m netbrew.converters.onnx.conformance --failures # list each failure's reason

Prints pass and fail counts by test kind and a per-op table for the node tests.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import unittest
import warnings
from dataclasses import dataclass

import onnx
import onnx.backend.test

from netbrew.converters.onnx.backend import NetbrewBackend
from netbrew.progress import Progress

KINDS = {
    "OnnxBackendNodeModelTest": "node",
    "OnnxBackendSimpleModelTest": "simple",
    "OnnxBackendPyTorchConvertedModelTest": "pytorch-converted",
    "OnnxBackendPyTorchOperatorModelTest": "pytorch-operator",
    "OnnxBackendRealModelTest": "model-zoo",
}


@dataclass
class Outcome:
    name: str
    kind: str
    passed: bool
    reason: str


def cpu_tests(pattern: str | None = None) -> list[tuple[str, unittest.TestCase]]:
    """(kind, test) for every CPU test of the suite, optionally filtered by substring."""
    suite = onnx.backend.test.BackendTest(NetbrewBackend, __name__)
    found = []
    for case_name, case in suite.test_cases.items():
        for test in unittest.defaultTestLoader.loadTestsFromTestCase(case):
            name = test._testMethodName
            if name.endswith("_cpu") and (pattern is None or pattern in name):
                found.append((KINDS.get(case_name, case_name), test))
    return found


def run_one(kind: str, test: unittest.TestCase) -> Outcome:
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test.run(result)
    problems = result.errors + result.failures
    if problems:
        reason = problems[0][1].strip().splitlines()[-1][:200]
    elif result.skipped:
        reason = "skipped: " + result.skipped[0][1]
    else:
        reason = ""
    return Outcome(test._testMethodName, kind, not problems and not result.skipped, reason)


@functools.cache
def _node_op_table() -> dict[str, list[str]]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return {c.name: sorted({n.op_type for n in c.model.graph.node}) for c in cases}


def node_ops(test_name: str) -> list[str]:
    """The op types of a node test's model."""
    return _node_op_table().get(test_name.removesuffix("_cpu"), [])


def report(outcomes: list[Outcome], show_failures: bool = False) -> str:
    lines = []
    by_kind = collections.defaultdict(lambda: [0, 0])
    for o in outcomes:
        by_kind[o.kind][0 if o.passed else 1] += 1
    lines.append(f"{'kind':<20}{'passed':>8}{'failed':>8}")
    for kind, (ok, bad) in sorted(by_kind.items()):
        lines.append(f"{kind:<20}{ok:>8}{bad:>8}")
    total_ok = sum(o.passed for o in outcomes)
    lines.append(f"{'total':<20}{total_ok:>8}{len(outcomes) - total_ok:>8}")
    per_op = collections.defaultdict(lambda: [0, 0])
    for o in outcomes:
        if o.kind == "node":
            for op in node_ops(o.name) or ["?"]:
                per_op[op][0 if o.passed else 1] += 1
    lines.append("")
    lines.append(f"{'op (node tests)':<32}{'passed':>8}{'failed':>8}")
    for op, (ok, bad) in sorted(per_op.items()):
        lines.append(f"{op:<32}{ok:>8}{bad:>8}")
    if show_failures:
        lines.append("")
        lines.extend(f"FAIL {o.name}: {o.reason}" for o in outcomes if not o.passed)
    lines.append("")
    lines.append(f"{total_ok} passed, {len(outcomes) - total_ok} failed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", help="run tests whose name contains this")
    parser.add_argument("--failures", action="store_true", help="list every failure")
    ns = parser.parse_args(argv)
    tests = cpu_tests(ns.pattern)
    bar = Progress(len(tests), "conformance")
    outcomes = []
    for i, (kind, test) in enumerate(tests, start=1):
        outcomes.append(run_one(kind, test))
        bar.update(i, passed=sum(o.passed for o in outcomes))
    bar.close()
    print(report(outcomes, ns.failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
