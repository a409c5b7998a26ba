"""Every registered op is complete: schema doc, CPU kernel, a gradient (or an explicit
no_gradient), an ONNX mapping (an ONNX op, a converter, or an explicit "not exportable"),
and a test that runs it. Gradient ops themselves are first-order only and not exported."""

import re
from pathlib import Path

import onnx.defs
import pytest

from netbrew.converters.onnx.to_onnx import CONVERTERS, NOT_EXPORTABLE
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
    if schema.onnx:
        domains = ("", "ai.onnx.ml", "ai.onnx.preview")
        assert any(onnx.defs.has(op_type, d) for d in domains), (
            f"{op_type} is marked onnx=True but ONNX has no such op"
        )
    else:
        exported = op_type in CONVERTERS or op_type in NOT_EXPORTABLE
        folded = op_type.endswith("Fill")  # fillers become initializers
        assert exported or folded or op_type.endswith("Gradient"), (
            f"{op_type}: register an ONNX converter (@to_onnx) or not_exportable(...)"
        )
    for i, o in schema.inplace.items():
        assert i < len(schema.inputs) and o < len(schema.outputs), f"{op_type} inplace {i}->{o}"
