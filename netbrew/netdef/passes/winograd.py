"""Winograd convolution: stride-1 3x3 Conv/ConvRelu ops with constant weights become
ConvWinograd/ConvWinogradRelu, which also read the weights' Winograd transform, made here
once (netbrew.operators.conv_winograd)."""

from __future__ import annotations

import numpy as np

from netbrew.netdef.args import args_dict
from netbrew.netdef.passes._graph import copy_net
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

WINOGRAD = {"Conv": "ConvWinograd", "ConvRelu": "ConvWinogradRelu"}
"""Op type -> its Winograd op type."""


def winograd_convs(net: NetDef, params: dict) -> tuple[NetDef, dict]:
    """Rewrites `Conv(X, W, B)` as `ConvWinograd(X, W, U, B)` (ConvRelu likewise), with
    W's Winograd transform U added to the params: `<W>__winograd4` = winograd4_weights(W),
    for F(4x4, 3x3), where the image size is known and that path pays there
    (conv_winograd4.use_winograd4), else `<W>__winograd` = winograd_weights(W), F(2x2, 3x3).

    An op qualifies when it runs on CPU; its weight W is in `params`, written by no op of the
    net, float32 or float64 and (M, C, 3, 3) with M and C at least
    conv_winograd.MIN_CHANNELS; and it is ungrouped, undilated and stride 1. Where the
    net's value_info gives the input X's height and width (the ONNX backend infers them),
    it must also be big enough for the Winograd path to pay (conv_winograd.use_winograd),
    so no transform is stored for a conv that would never use it. The new op takes the
    Winograd path only where it pays for the image size met at run time, and runs as Conv
    elsewhere, with the same results up to rounding (a few ulps).

    Args:
        net: the NetDef; not modified.
        params: parameter values by name; not modified.

    Returns:
        (new NetDef, new params): the params gain one transform per distinct weight, and
        the net's external inputs gain the transforms of the weights among them.
    """
    # late imports: the operators import netdef
    from netbrew.operators.conv_winograd import winograd_weights
    from netbrew.operators.conv_winograd4 import winograd4_weights

    written = {name for op in net.op for name in op.output}
    sizes = _image_sizes(net)
    new_params = dict(params)
    ops = []
    added: list[str] = []
    for op in net.op:
        tile = _tile(op, params, written, sizes)
        if not tile:
            ops.append(op)
            continue
        name = f"{op.input[1]}__winograd" + ("4" if tile == 4 else "")
        if name not in new_params:
            transform = winograd4_weights if tile == 4 else winograd_weights
            new_params[name] = transform(np.asarray(params[op.input[1]]))
            if op.input[1] in net.external_input:
                added.append(name)
        new = OperatorDef()
        new.CopyFrom(op)
        new.type = WINOGRAD[op.type]
        del new.input[:]
        new.input.extend([op.input[0], op.input[1], name, *op.input[2:]])
        ops.append(new)
    out = copy_net(net, ops)
    out.external_input.extend(added)
    return out, new_params


def _image_sizes(net: NetDef) -> dict[str, tuple[int, int]]:
    """(H, W) of the 4-D blobs whose value_info gives both."""
    sizes = {}
    for info in net.value_info:
        if not info.unknown_shape and len(info.dims) == 4 and not {2, 3} & set(info.unknown_dims):
            sizes[info.name] = (info.dims[2], info.dims[3])
    return sizes


def _tile(
    op: OperatorDef, params: dict, written: set[str], sizes: dict[str, tuple[int, int]]
) -> int:
    """The output tile size of the Winograd transform `op` should get: 4 for F(4x4, 3x3),
    2 for F(2x2, 3x3), 0 for none."""
    from netbrew.operators.conv_winograd import (
        MIN_CHANNELS,
        plain_3x3,
        use_winograd,
        winograd_pads,
    )
    from netbrew.operators.conv_winograd4 import use_winograd4

    if op.type not in WINOGRAD or op.device_option.device_type != 0 or len(op.input) < 2:
        return 0
    weight = op.input[1]
    if weight not in params or weight in written:
        return 0
    w = params[weight]
    if not isinstance(w, np.ndarray) or w.dtype not in (np.float32, np.float64):
        return 0
    attrs = args_dict(op.arg)
    if not (plain_3x3(w.shape, attrs) and min(w.shape[:2]) >= MIN_CHANNELS):
        return 0
    if op.input[0] not in sizes:  # image size unknown until run time: let the op decide
        return 2
    found = winograd_pads((1, w.shape[1], *sizes[op.input[0]]), w.shape, attrs)
    if found is None:
        return 0
    if use_winograd4(w.shape[1], w.shape[0], found[1]):
        return 4
    return 2 if use_winograd(w.shape[1], w.shape[0], found[1]) else 0
