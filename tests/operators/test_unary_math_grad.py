"""Gradients of Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh and Erf."""

import numpy as np
import pytest

from netbrew.errors import SchemaError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

# op -> input range inside the op's domain (away from its poles)
RANGES = {
    "Sin": (-4, 4),
    "Cos": (-4, 4),
    "Tan": (-1.2, 1.2),
    "Asin": (-0.9, 0.9),
    "Acos": (-0.9, 0.9),
    "Atan": (-5, 5),
    "Sinh": (-3, 3),
    "Cosh": (-3, 3),
    "Asinh": (-5, 5),
    "Acosh": (1.2, 5),
    "Atanh": (-0.9, 0.9),
    "Erf": (-3, 3),
}
GRADIENT_OPS = {
    "Sin": "SinGradient", "Cos": "CosGradient", "Tan": "TanGradient", "Asin": "AsinGradient",
    "Acos": "AcosGradient", "Atan": "AtanGradient", "Sinh": "SinhGradient",
    "Cosh": "CoshGradient", "Asinh": "AsinhGradient", "Acosh": "AcoshGradient",
    "Atanh": "AtanhGradient", "Erf": "ErfGradient",
}  # fmt: skip


@pytest.mark.parametrize("shape", [(7,), (2, 3, 4)])
@pytest.mark.parametrize("op", sorted(RANGES))
def test_gradient(op, shape):
    low, high = RANGES[op]
    check_gradient(op, [rand(*shape, low=low, high=high)], eps=1e-4)


@pytest.mark.parametrize("op", sorted(GRADIENT_OPS))
def test_maker_emits(op):
    (grad_op,) = GRADIENTS[op](op_def(op, ["x"], ["y"]), ["dy"], ["dx"])
    assert grad_op.type == GRADIENT_OPS[op]
    assert list(grad_op.input) == ["x", "dy"] and list(grad_op.output) == ["dx"]


def test_gradient_op_keeps_dtype():
    x = rand(5, low=-0.5, high=0.5)
    (dx,) = run_op("AtanhGradient", [x, np.full(5, 2, np.float32)])
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, 2 / (1 - x.astype(np.float64) ** 2), rtol=1e-6)
    (dx,) = run_op("ErfGradient", [np.array([0.0, 30.0]), np.ones(2)])
    np.testing.assert_allclose(dx, [2 / np.sqrt(np.pi), 0.0])


def test_in_place_is_refused():
    net = NetDef(name="t", op=[op_def("Sin", ["x"], ["x"])])
    with pytest.raises(SchemaError, match="overwrites in place"):
        add_gradient_ops(net, ["x"], wrt=["x"])
    ws = Workspace()  # run out of place it works
    ws.feed_blob("x", rand(3))
    net = NetDef(name="t", op=[op_def("Sin", ["x"], ["y"])])
    grads = add_gradient_ops(net, ["y"], wrt=["x"])
    ws.run_net_once(net)
    np.testing.assert_allclose(ws.fetch_blob(grads["x"]), np.cos(rand(3)), rtol=1e-6)
