"""Every registered op is complete: schema doc, CPU kernel, a gradient (or an explicit
no_gradient), and a test that runs it. Gradient ops themselves are first-order only."""

import re
from pathlib import Path

import pytest

from netbrew.operators import GRADIENTS, KERNELS, SCHEMAS

TEST_TEXT = "\n".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
ALL = sorted(SCHEMAS)


def test_registry_is_populated():
    assert len(ALL) >= 60


@pytest.mark.parametrize("op_type", ALL)
def test_op_is_complete(op_type):
    schema = SCHEMAS[op_type]
    assert schema.doc, f"{op_type} has no formula line"
    assert (op_type, "cpu") in KERNELS, f"{op_type} has no cpu kernel"
    assert re.search(rf"[\"']{op_type}[\"']", TEST_TEXT), f"{op_type} has no test"
    if not op_type.endswith("Gradient"):
        assert op_type in GRADIENTS, f"{op_type}: register a gradient or no_gradient(...)"
    for i, o in schema.inplace.items():
        assert i < len(schema.inputs) and o < len(schema.outputs), f"{op_type} inplace {i}->{o}"
