"""ConvGradient and ConvTransposeGradient against central differences, on both col2im paths.

Small images take a selection GEMM for im2col/col2im, larger ones strided copies; the
`path` fixture forces each one so that both are checked on every case.
"""

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.executor import Workspace
from netbrew.netdef import op_def
from netbrew.netdef.autodiff import add_gradient_ops
from netbrew.operators import GRADIENTS, window, window_grad
from netbrew.proto.netbrew_pb2 import NetDef
from netbrew.testing import check_gradient, rand, run_op

POINTS = 30


# (X shape, W shape, attrs): every rank, groups, depthwise, strides, dilations, pads, auto_pad.
CONV = {
    "1d": ((2, 3, 7), (4, 3, 3), {}),
    "1d_stride_dilation_pads": (
        (2, 2, 9),
        (3, 2, 3),
        dict(strides=[2], dilations=[2], pads=[2, 1]),
    ),
    "2d_asymmetric_pads": ((2, 3, 5, 6), (4, 3, 3, 2), dict(pads=[1, 0, 2, 1])),
    "2d_stride_dilation": ((1, 2, 7, 8), (3, 2, 2, 3), dict(strides=[2, 3], dilations=[2, 1])),
    "2d_groups": ((2, 4, 5, 5), (4, 2, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    "2d_depthwise": ((2, 3, 6, 5), (6, 1, 3, 3), dict(group=3, strides=[2, 1], pads=[1] * 4)),
    "2d_same_upper": ((1, 2, 7, 6), (3, 2, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "2d_same_lower": ((1, 2, 6, 7), (2, 2, 2, 3), dict(auto_pad="SAME_LOWER", strides=[2, 3])),
    "2d_valid": ((2, 2, 6, 5), (3, 2, 3, 2), dict(auto_pad="VALID", strides=[2, 1])),
    "2d_1x1_grouped": ((2, 4, 3, 4), (2, 2, 1, 1), dict(group=2)),
    "2d_wide_groups": ((1, 16, 4, 3), (4, 8, 2, 2), dict(group=2, pads=[1, 0, 0, 1])),
    "3d": ((1, 2, 4, 5, 4), (2, 2, 2, 3, 2), dict(strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 1])),
    "3d_depthwise_dilated": ((1, 2, 5, 4, 5), (2, 1, 2, 2, 2), dict(group=2, dilations=[2, 1, 2])),
}


@pytest.mark.parametrize("case", list(CONV))
def test_conv_gradient(case, path):
    x_shape, w_shape, attrs = CONV[case]
    x, w, b = rand(*x_shape, seed=1), rand(*w_shape, seed=2), rand(w_shape[0], seed=3)
    check_gradient("Conv", [x, w, b], max_points=POINTS, **attrs)


# (X shape, W shape (C, M/group, k...), attrs), output_shape and output_padding included.
CONV_TRANSPOSE = {
    "1d": ((2, 3, 4), (3, 2, 3), dict(strides=[2])),
    "2d_pads_output_padding": (
        (1, 2, 3, 4),
        (2, 3, 3, 2),
        dict(strides=[2, 3], pads=[1, 0, 0, 1], output_padding=[1, 2]),
    ),
    "2d_groups_dilation": ((2, 4, 3, 3), (4, 1, 2, 3), dict(group=2, dilations=[2, 1])),
    "2d_wide": ((1, 2, 3, 3), (2, 8, 2, 2), dict(strides=[2, 1])),
    "2d_output_shape": ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[2, 2], output_shape=[8, 7])),
    "2d_same_upper": ((1, 2, 3, 2), (2, 1, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "2d_same_lower": ((1, 1, 3, 3), (1, 2, 2, 3), dict(strides=[2, 1], auto_pad="SAME_LOWER")),
    "3d": ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), dict(strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1])),
}


@pytest.mark.parametrize("case", list(CONV_TRANSPOSE))
def test_conv_transpose_gradient(case, path):
    x_shape, w_shape, attrs = CONV_TRANSPOSE[case]
    x, w = rand(*x_shape, seed=1), rand(*w_shape, seed=2)
    b = rand(w_shape[1] * attrs.get("group", 1), seed=3)
    check_gradient("ConvTranspose", [x, w, b], max_points=POINTS, **attrs)


WINDOWS = [  # (input spatial shape, make_window arguments)
    ((7,), dict(kernel=[3], strides=[2], dilations=[2], pads=[2, 1])),
    ((5, 6), dict(kernel=[3, 2], pads=[1, 0, 2, 1])),
    ((6, 7), dict(kernel=[2, 3], strides=[2, 3], auto_pad="SAME_LOWER")),
    ((7, 8), dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=True)),
    ((4, 5, 4), dict(kernel=[2, 3, 2], strides=[1, 2, 1], dilations=[2, 1, 1])),
]


@pytest.mark.parametrize("in_shape, args", WINDOWS)
def test_selection_gemm_matches_strided_copies(in_shape, args, force_path):
    """im2col, batch_columns and col2im give the same arrays on both paths."""
    win = window.make_window(in_shape, **args)
    x = rand(2, 4, *in_shape, dtype=np.float64)
    cols = rand(2, 4, *win.kernel, *win.out, dtype=np.float64, seed=1)

    def run():
        return (
            window.im2col(x, win, 2),
            window.batch_columns(x, win),
            window_grad.col2im(cols, win, in_shape),
        )

    force_path("strided")
    strided = run()
    force_path("selection")
    for got, want in zip(run(), strided):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op_type", ["Conv", "ConvTranspose"])
def test_gradient_skips_unwanted_outputs(op_type):
    """Outputs named '' are not computed; the named ones match the full gradient."""
    x, w, dy = rand(2, 4, 5, 5, seed=1), rand(4, 2, 3, 3, seed=2), None
    y = run_op(op_type, [x, w], group=2, strides=[2, 2])[0]
    dy = rand(*y.shape, seed=3)
    grad = f"{op_type}Gradient"
    full = run_op(grad, [x, w, dy], outputs=3, group=2, strides=[2, 2])
    only_w = run_op(grad, [x, w, dy], outputs=["", "dW", ""], group=2, strides=[2, 2])
    assert len(only_w) == 1
    np.testing.assert_allclose(only_w[0], full[1], rtol=1e-6)
    assert full[0].shape == x.shape and full[2].shape == (y.shape[1],)
    assert all(g.dtype == np.float32 for g in full)


def test_conv_maker_skips_input_gradient_of_data():
    """A first layer's input needs no gradient: ConvGradient gets '' for dX."""
    net = NetDef(name="first_layer")
    net.op.append(op_def("Conv", ["data", "w", "b"], ["y"], pads=[1, 1, 1, 1]))
    add_gradient_ops(net, ["y"], wrt=["w", "b"])
    grad = next(op for op in net.op if op.type == "ConvGradient")
    assert list(grad.input) == ["data", "w", "y_grad"]
    assert list(grad.output) == ["", "w_grad", "b_grad"]
    ws = Workspace()
    for name, value in (("data", rand(2, 1, 6, 6)), ("w", rand(3, 1, 3, 3, seed=1))):
        ws.feed_blob(name, value)
    ws.feed_blob("b", rand(3, seed=2))
    ws.run_net_once(net)
    np.testing.assert_allclose(ws.fetch_blob("b_grad"), np.full(3, 36.0 * 2))
    assert not ws.has_blob("data_grad")


def test_conv_transpose_maker_emits_gradient_op():
    op = op_def("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    (grad,) = GRADIENTS["ConvTranspose"](op, ["y_grad"], ["x_grad", None])
    assert grad.type == "ConvTransposeGradient"
    assert list(grad.output) == ["x_grad", ""]


@pytest.mark.parametrize(
    "op_type, w_shape, dy_shape",
    [("Conv", (4, 3, 3, 3), (2, 4, 4, 4)), ("ConvTranspose", (3, 4, 3, 3), (2, 4, 5, 5))],
)
def test_gradient_rejects_wrong_dy_shape(op_type, w_shape, dy_shape):
    x, w, dy = rand(2, 3, 4, 4), rand(*w_shape), rand(*dy_shape)
    with pytest.raises(OperatorError, match=r"input dY has shape \[2, 4, [45], [45]\], expected"):
        run_op(f"{op_type}Gradient", [x, w, dy], outputs=2)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_conv_gradient_keeps_dtype(dtype):
    x, w = rand(2, 2, 5, 5, dtype=dtype), rand(3, 2, 3, 3, dtype=dtype, seed=1)
    dy = rand(2, 3, 3, 3, dtype=dtype, seed=2)
    grads = run_op("ConvGradient", [x, w, dy], outputs=3)
    assert [g.dtype for g in grads] == [dtype] * 3
