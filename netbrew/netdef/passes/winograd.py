"""Winograd convolution: stride-1 3x3 Conv/ConvRelu ops with constant weights become
ConvWinograd/ConvWinogradRelu, which also read the weights' Winograd transform, made here
once (netbrew.operators.conv_winograd). Mid-sized 3x3 convs that only convs read get the
weights laid out for a channels-last im2col instead (netbrew.operators.conv_hwc)."""

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

    Where neither Winograd tile pays, a 3x3 conv (stride 1 or 2) whose output only convs
    (as their input X) and Concats read, that does not narrow the channels enough for
    conv_shift's kn2row (DenseNet's 128 -> 32 convs ran 1.12x slower channels-last), and
    that conv_hwc.use_hwc says pays at the known image size,
    gets `<W>__hwc` = hwc_weights(W), W laid out (3, 3, C, M): the op then runs a
    channels-last im2col and leaves its output channels-last, which the reading convs take
    at no cost (a net output or another reader would have to walk it transposed).

    Args:
        net: the NetDef; not modified.
        params: parameter values by name; not modified.

    Returns:
        (new NetDef, new params): the params gain one transform per distinct weight, and
        the net's external inputs gain the transforms of the weights among them.
    """
    # late imports: the operators import netdef
    from netbrew.operators.conv_hwc import hwc_weights
    from netbrew.operators.conv_winograd import winograd_weights
    from netbrew.operators.conv_winograd4 import winograd4_weights

    transforms = {"winograd4": winograd4_weights, "winograd": winograd_weights, "hwc": hwc_weights}
    written = {name for op in net.op for name in op.output}
    sizes = _image_sizes(net)
    conv_fed = _conv_fed(net)
    new_params = dict(params)
    ops = []
    added: list[str] = []
    for op in net.op:
        kind = _transform(op, params, written, sizes, conv_fed)
        if not kind:
            ops.append(op)
            continue
        name = f"{op.input[1]}__{kind}"
        if name not in new_params:
            new_params[name] = transforms[kind](np.asarray(params[op.input[1]]))
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


def _conv_fed(net: NetDef) -> set[str]:
    """The blobs that only convs (as their input X) and Concats read, and that are not net
    outputs: a conv writing one may leave it channels-last. Convs read either layout at no
    cost; a Concat copies its inputs into a new array whatever their layout (inception's
    and squeezenet's 3x3 convs, whose outputs go to a Concat, ran 0.91x and 0.93x the time
    channels-last, alternating processes; DenseNet-121 1.0x)."""
    convs = set(WINOGRAD) | set(WINOGRAD.values()) | {"FusedConv"}
    any_layout: dict[str, bool] = {}  # blob -> whether every reader so far takes any layout
    for op in net.op:
        for slot, name in enumerate(op.input):
            takes = op.type == "Concat" or (slot == 0 and op.type in convs)
            any_layout[name] = any_layout.get(name, True) and takes
    outputs = set(net.external_output)
    return {name for name, ok in any_layout.items() if ok and name not in outputs}


def _transform(
    op: OperatorDef,
    params: dict,
    written: set[str],
    sizes: dict[str, tuple[int, int]],
    conv_fed: set[str],
) -> str:
    """Which weight transform `op` should get: "winograd4" for F(4x4, 3x3), "winograd" for
    F(2x2, 3x3), "hwc" for the channels-last im2col (conv_hwc), "" for none."""
    from netbrew.operators.conv_hwc import use_hwc
    from netbrew.operators.conv_shift import use_shift
    from netbrew.operators.conv_winograd import (
        MIN_CHANNELS,
        plain_3x3,
        use_winograd,
        winograd_pads,
    )
    from netbrew.operators.conv_winograd4 import use_winograd4
    from netbrew.operators.window import make_window

    if op.type not in WINOGRAD or op.device_option.device_type != 0 or len(op.input) < 2:
        return ""
    weight = op.input[1]
    if weight not in params or weight in written:
        return ""
    w = params[weight]
    if not isinstance(w, np.ndarray) or w.dtype not in (np.float32, np.float64):
        return ""
    attrs = args_dict(op.arg)
    if plain_3x3(w.shape, attrs) and min(w.shape[:2]) >= MIN_CHANNELS:
        if op.input[0] not in sizes:  # image size unknown until run time: let the op decide
            return "winograd"
        found = winograd_pads((1, w.shape[1], *sizes[op.input[0]]), w.shape, attrs)
        if found is not None and use_winograd4(w.shape[1], w.shape[0], found[1]):
            return "winograd4"
        if found is not None and use_winograd(w.shape[1], w.shape[0], found[1]):
            return "winograd"
    strided = dict(attrs, strides=[1, 1])  # the channels-last im2col takes any stride
    if not (
        plain_3x3(w.shape, strided)
        and op.input[0] in sizes
        and op.output[0] in conv_fed
        and all(v in (1, 2) for v in attrs.get("strides") or ())
    ):
        return ""
    win = make_window(
        sizes[op.input[0]],
        (3, 3),
        attrs.get("strides"),
        None,
        attrs.get("pads"),
        attrs.get("auto_pad", "NOTSET"),
    )
    if use_shift(w.shape[1], w.shape[0], win, 1):  # narrowing convs: kn2row beats both
        return ""
    size = sizes[op.input[0]]
    if min(win.begin) < 0 or not use_hwc(w.shape[1], w.shape[0], size, win.out, win.strides):
        return ""
    return "hwc"
