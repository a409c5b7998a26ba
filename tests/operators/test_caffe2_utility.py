"""Caffe2's utility ops (SquaredL2Distance, Scale, Copy, Alias, EnsureCPUOutput, Print,
Summarize) against NumPy written out here, their gradients by central differences, and
the exportable ones through ONNX and onnxruntime."""

import math

import numpy as np
import pytest

from netbrew.converters.onnx import export
from netbrew.errors import OperatorError, SchemaError, UnsupportedConversion
from netbrew.executor import Workspace
from netbrew.netdef import Net, op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, NoGradient
from netbrew.testing import check_gradient, check_op, rand, run_op

# SquaredL2Distance


def squared_l2_distance64(x, y):
    n = x.shape[0] if x.ndim else 1
    d = int(np.prod(x.shape[1:]))
    diff = x.astype(np.float64).reshape(n, d) - y.astype(np.float64).reshape(n, d)
    return (0.5 * (diff * diff).sum(axis=1)).astype(x.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (5,), (), (0, 4), (3, 0)])
def test_squared_l2_distance(shape, dtype):
    x, y = rand(*shape, dtype=dtype, seed=1), rand(*shape, dtype=dtype, seed=2)
    got = check_op(
        "SquaredL2Distance", [x, y], reference=lambda x, y: (squared_l2_distance64(x, y),)
    )
    assert got[0].shape == ((shape[0],) if shape else (1,))  # Caffe2: one value per row


def test_squared_l2_distance_has_the_half_factor():
    x = np.array([[3.0, 4.0], [1.0, 1.0]], np.float32)
    (z,) = run_op("SquaredL2Distance", [x, np.zeros_like(x)])
    np.testing.assert_array_equal(z, [12.5, 1.0])  # 0.5 * (9 + 16), 0.5 * (1 + 1)


def test_squared_l2_distance_close_inputs_do_not_cancel():
    # Caffe2's (|x|^2 + |y|^2) / 2 - x.y loses everything here in float32.
    x = np.full((1, 64), 1000.0, np.float32)
    y = x + np.float32(1e-2)
    (z,) = run_op("SquaredL2Distance", [x, y])
    np.testing.assert_allclose(z, [0.5 * 64 * float(y[0, 0] - x[0, 0]) ** 2], rtol=1e-5)


def test_squared_l2_distance_errors():
    with pytest.raises(OperatorError, match=r"'X' \[2, 3\] and 'Y' \[3, 2\] must have the same"):
        run_op("SquaredL2Distance", [rand(2, 3), rand(3, 2)])
    with pytest.raises(OperatorError, match="expected a float type"):
        run_op("SquaredL2Distance", [np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)])


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 2), (5,)])
def test_squared_l2_distance_gradient(shape):
    check_gradient("SquaredL2Distance", [rand(*shape, seed=3), rand(*shape, seed=4)], wrt=[0, 1])


def test_squared_l2_distance_gradient_op_and_mask():
    x, y, dz = rand(3, 2, 2, seed=5), rand(3, 2, 2, seed=6), rand(3, seed=7)
    dx = ((x - y).reshape(3, -1) * dz[:, None]).reshape(x.shape)
    check_op("SquaredL2DistanceGradient", [x, y, dz], reference=lambda *a: (dx, -dx))
    (only_dy,) = run_op("SquaredL2DistanceGradient", [x, y, dz], outputs=["", "dy"])
    np.testing.assert_allclose(only_dy, -dx, rtol=1e-6)
    with pytest.raises(OperatorError, match=r"'dZ' has shape \[2\], expected \[3\]"):
        run_op("SquaredL2DistanceGradient", [x, y, rand(2)], outputs=2)


# Scale


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("scale", [2.5, -0.5, 0.0, None])
def test_scale(scale, dtype):
    x = rand(3, 4, dtype=dtype)
    factor = 1.0 if scale is None else scale  # Caffe2's default scale is 1
    check_op("Scale", [x], reference=lambda x: (x * dtype(factor),), scale=scale)


def test_scale_in_place_and_int_scale():
    net = Net("scale")
    net.Scale("x", "x", scale=3)  # an int argument is read as a float, as Caffe2 did
    ws = Workspace()
    ws.feed_blob("x", np.array([1.0, -2.0], np.float32))
    ws.run_net_once(net)
    np.testing.assert_array_equal(ws.fetch_blob("x"), [3.0, -6.0])


def test_scale_refuses_integers():
    with pytest.raises(OperatorError, match="expected a float type"):
        run_op("Scale", [np.arange(3)], scale=2.0)


@pytest.mark.parametrize("scale", [-1.5, 0.25])
def test_scale_gradient(scale):
    check_gradient("Scale", [rand(2, 3, seed=8)], scale=scale)


# Copy, Alias, EnsureCPUOutput


IDENTITY_INPUTS = [
    rand(2, 3),
    np.arange(6, dtype=np.int64).reshape(3, 2),
    np.array([True, False]),
    np.array(["a", "bc"]),
    np.float64(2.5) * np.ones(()),
]


@pytest.mark.parametrize("op_type", ["Copy", "Alias", "EnsureCPUOutput"])
@pytest.mark.parametrize("x", IDENTITY_INPUTS, ids=lambda x: f"{x.dtype}{list(x.shape)}")
def test_identity_ops(op_type, x):
    check_op(op_type, [x], reference=lambda x: (x.copy(),))


@pytest.mark.parametrize("op_type, shares", [("Copy", False), ("EnsureCPUOutput", False),
                                             ("Alias", True)])  # fmt: skip
def test_copy_owns_its_storage_and_alias_shares(op_type, shares):
    ws = Workspace()
    x = rand(4)
    ws.feed_blob("x", x)
    ws.run_operator_once(op_def(op_type, ["x"], ["y"]))
    assert np.shares_memory(ws.fetch_blob("y"), x) is shares


@pytest.mark.parametrize("op_type", ["Copy", "Alias", "EnsureCPUOutput"])
def test_identity_ops_gradient(op_type):
    check_gradient(op_type, [rand(3, 2, seed=9)])
    (grad_op,) = GRADIENTS[op_type](op_def(op_type, ["x"], ["y"]), ["dy"], ["dx"])
    assert (grad_op.type, list(grad_op.input), list(grad_op.output)) == (op_type, ["dy"], ["dx"])


def test_gradient_flows_through_a_chain_of_the_ops():
    net = Net("chain")
    net.Copy("x", "a")
    net.Alias("a", "b")
    net.EnsureCPUOutput("b", "c")
    net.Scale("c", "d", scale=3.0)
    net.SquaredL2Distance(["d", "y"], "z")
    net.AveragedLoss("z", "loss")
    grads = add_gradient_ops(net, ["loss"], wrt=["x", "y"])
    x, y = rand(4, 3, seed=10, dtype=np.float64), rand(4, 3, seed=11, dtype=np.float64)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("y", y)
    ws.run_net_once(net)
    # loss = mean_i 0.5 |3 x_i - y_i|^2: dx = 3 (3x - y) / N, dy = -(3x - y) / N
    np.testing.assert_allclose(ws.fetch_blob(grads["x"]), 3 * (3 * x - y) / 4, rtol=1e-12)
    np.testing.assert_allclose(ws.fetch_blob(grads["y"]), -(3 * x - y) / 4, rtol=1e-12)


# Print


def print_line(x, **attrs):
    run_op("Print", [x], outputs=0, **attrs)


def test_print_writes_caffe2s_line(capsys):
    x = np.array([[0.5, -1.25, 3.0], [1e-7, 123456789.0, np.nan]], np.float32)
    print_line(x)
    assert capsys.readouterr().out == (
        "Tensor in0 of type float32. Dims: (2,3,): 0.5,-1.25,3,1e-07,1.23457e+08,nan\n"
    )


@pytest.mark.parametrize(
    "x, line",
    [
        (np.array([True, False, True]), "Tensor in0 of type bool. Dims: (3,): 1,0,1"),
        (np.arange(4).reshape(2, 2), "Tensor in0 of type int64. Dims: (2,2,): 0,1,2,3"),
        (np.array(7, np.int32), "Tensor in0 of type int32. Dims: (): 7"),
        (np.zeros((0, 3), np.float32), "Tensor in0 of type float32. Dims: (0,3,): "),
        (np.array(["ab", "c"]), "Tensor in0 of type <U2. Dims: (2,): ab,c"),
    ],
)  # fmt: skip
def test_print_types_and_shapes(capsys, x, line):
    print_line(x)
    assert capsys.readouterr().out == line + "\n"


def test_print_limit(capsys):
    print_line(np.arange(10, dtype=np.float32), limit=3)
    assert capsys.readouterr().out.endswith("Dims: (10,): 0,1,2\n")
    print_line(np.arange(1005, dtype=np.int32))  # limit=0: Caffe2's 1000
    values = capsys.readouterr().out.rstrip("\n").split("): ", 1)[1].split(",")
    assert values == [str(i) for i in range(1000)]
    print_line(np.arange(4, dtype=np.int32), limit=100)  # a limit beyond the size: all
    assert capsys.readouterr().out.endswith(": 0,1,2,3\n")


def test_print_every_n_counts_the_runs_of_a_created_net(capsys):
    net = Net("every")
    net.Print("x", [], every_n=3)
    ws = Workspace()
    ws.feed_blob("x", np.array([0], np.int32))
    ws.create_net(net)
    for run in range(7):
        ws.feed_blob("x", np.array([run], np.int32))
        ws.run_net(net)
    lines = capsys.readouterr().out.splitlines()
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["0", "3", "6"]  # runs 1, 4, 7


def test_print_once_ops_are_fresh_each_time(capsys):
    # Caffe2's RunOperatorOnce built a new op (a new counter) every call.
    for _ in range(2):
        print_line(np.ones(1, np.float32), every_n=2)
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_print_to_file(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net = Net("tofile")
    net.Print("scope/x", [], to_file=1, limit=2)
    ws = Workspace()
    ws.create_net(net)
    for run in range(3):
        ws.feed_blob("scope/x", np.array([run, 10, 20], np.float32))
        ws.run_net(net)
    path = tmp_path / "scope#x.log"  # '/' is not a directory: '#' as Caffe2's Summarize
    assert path.read_text().splitlines() == [
        f"Tensor scope/x of type float32. Dims: (3,): {run},10" for run in range(3)
    ]
    assert capsys.readouterr().out == ""
    ws.create_net(net, overwrite=True)  # a new op truncates, as Caffe2's opened the file
    ws.run_net(net)
    assert len(path.read_text().splitlines()) == 1


def test_print_errors_and_gradient():
    with pytest.raises(OperatorError, match="'every_n' is 0, expected 1 or more"):
        print_line(np.ones(2), every_n=0)
    with pytest.raises(OperatorError, match="'limit' is -1"):
        print_line(np.ones(2), limit=-1)
    with pytest.raises(SchemaError, match="got 1 outputs, expected 0"):
        run_op("Print", [np.ones(2)], outputs=1)
    assert isinstance(GRADIENTS["Print"], NoGradient)


# Summarize


def summary64(x):
    v = x.astype(np.float64).ravel()
    std = v.std(ddof=1) if v.size > 1 else 0.0
    return np.array([v.min(), v.max(), v.mean(), std], np.float32)


@pytest.mark.parametrize(
    "x",
    [rand(5, seed=12), rand(3, 4, seed=13, dtype=np.float64), np.arange(-3, 9, dtype=np.int32),
     np.array([2.5], np.float32)],
    ids=["float32", "float64", "int32", "one-value"],
)  # fmt: skip
def test_summarize(x):
    got = check_op("Summarize", [x], reference=lambda x: (summary64(x),))
    if x.size == 1:
        assert got[0][3] == 0  # Caffe2: std of one value is 0, not nan


def test_summarize_order_is_min_max_mean_std():
    (got,) = run_op("Summarize", [np.array([1.0, 3.0, 5.0, 7.0], np.float32)])
    np.testing.assert_allclose(got, [1.0, 7.0, 4.0, math.sqrt(20 / 3)], rtol=1e-6)


def test_summarize_to_file_without_output(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    net = Net("summary")
    net.Summarize("a/b", [], to_file=1)
    ws = Workspace()
    ws.create_net(net)
    for x in ([1.0, 2.0, 4.0], [0.5, 0.5]):
        ws.feed_blob("a/b", np.array(x, np.float32))
        ws.run_net(net)
    assert (tmp_path / "a#b.summary").read_text() == "1 4 2.33333 1.52753\n0.5 0.5 0.5 0\n"


def test_summarize_errors_and_gradient():
    with pytest.raises(OperatorError, match=r"'data' of shape \[0\] is empty"):
        run_op("Summarize", [np.zeros(0, np.float32)])
    # a real gradient, checked by central differences in test_fused_grad.py
    net = Net("through")
    net.Summarize("x", "s")
    net.AveragedLoss("s", "loss")
    add_gradient_ops(net, ["loss"], wrt=["x"])
    assert "SummarizeGradient" in [op.type for op in net.ops]


# ONNX export

ORT_OPSET = 21


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_export_round_trip_through_onnxruntime(dtype):
    ort = pytest.importorskip("onnxruntime")
    net = Net("utility")
    net.add_external_input("x", "y")
    net.Copy("x", "a")
    net.Alias("a", "b")
    net.EnsureCPUOutput("b", "c")
    net.Scale("c", "d", scale=-2.5)
    net.Scale("d", "d", scale=0.5)  # in place: export renames the first write
    net.SquaredL2Distance(["d", "y"], "z")
    net.add_external_output("d", "z")
    x, y = rand(4, 2, 3, seed=14, dtype=dtype), rand(4, 2, 3, seed=15, dtype=dtype)
    model = export(net, inputs={"x": x, "y": y}, opset=ORT_OPSET)
    kinds = {n.op_type for n in model.graph.node}
    assert {"Identity", "Mul", "ReduceSumSquare"} <= kinds
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got_d, got_z = session.run(["d", "z"], {"x": x, "y": y})
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("y", y)
    ws.run_net_once(net)
    assert got_z.dtype == dtype and got_z.shape == (4,)
    np.testing.assert_allclose(got_d, ws.fetch_blob("d"), rtol=1e-6)
    np.testing.assert_allclose(got_z, ws.fetch_blob("z"), rtol=1e-5)
    np.testing.assert_allclose(got_z, squared_l2_distance64(x * -1.25, y), rtol=1e-5)


def test_print_and_summarize_are_not_exported():
    net = Net("logs")
    net.add_external_input("x")
    net.Print("x", [])
    net.Summarize("x", "s")
    net.add_external_output("s")
    with pytest.raises(UnsupportedConversion) as info:
        export(net, inputs={"x": (2, 3)})
    text = str(info.value)
    assert "Print is a logging op" in text and "Summarize is a logging op" in text
