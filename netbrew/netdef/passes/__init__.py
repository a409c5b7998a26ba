"""Graph passes, each a function NetDef -> new NetDef that leaves its input unchanged.

`optimize(net, level)` applies the inference-safe ones in order.
"""

from __future__ import annotations

from collections.abc import Iterable

from netbrew.netdef.passes.channel_shuffle import fold_channel_shuffle
from netbrew.netdef.passes.constant_folding import fold_constants
from netbrew.netdef.passes.cse import eliminate_common_subexpressions
from netbrew.netdef.passes.dead_code import eliminate_dead_code
from netbrew.netdef.passes.elementwise_fusion import fuse_elementwise
from netbrew.netdef.passes.fold_batchnorm import fold_batch_norm
from netbrew.netdef.passes.fusion import fuse_activation, fuse_conv_epilogue
from netbrew.netdef.passes.memonger import share_blobs
from netbrew.netdef.passes.transformer import fuse_transformer
from netbrew.netdef.passes.winograd import winograd_convs
from netbrew.proto.netbrew_pb2 import NetDef


def optimize(net: NetDef, level: int = 1, params: dict | None = None, *, keep: Iterable[str] = ()):
    """Applies the inference passes: level 0 none; 1 dead code, constant folding and
    common subexpressions; 2 also BatchNormalization folding, Relu fusion, Winograd convs
    and channel-shuffle folding first, then elementwise-chain fusion and, last, blob
    sharing (memonger). Blob sharing renames intermediate blobs, so it runs only on a net
    that names its external outputs, and it keeps those, the external inputs, `params` and
    `keep` by name.

    Args:
        net: the NetDef (or Net); not modified.
        level: 0, 1 or 2.
        params: parameter values; constant folding treats them as constants, BN folding
            rewrites them and the Winograd pass adds weight transforms.
        keep: blobs the caller fetches after a run besides the external outputs (level 2).

    Returns:
        The new NetDef, or (new NetDef, new params) when `params` is given.
    """
    out = net.proto() if hasattr(net, "proto") else net
    new_params = dict(params or {})
    if level >= 2:
        out, new_params = rewrite_for_inference(out, new_params)
    if level >= 1:
        out = fold_constants(out, new_params or None)
        out = eliminate_common_subexpressions(out)
        out = eliminate_dead_code(out)
    if level >= 2:
        out = fuse_elementwise(out)
        if out.external_output:
            out = share_blobs(out, keep={*keep, *new_params, *(params or {})})
    if level == 0:
        out = _copy(out)
    return (out, new_params) if params is not None else out


def rewrite_for_inference(net: NetDef, params: dict, device: str = "cpu") -> tuple[NetDef, dict]:
    """The level-2 rewrites that read the parameters, in order: BatchNormalization folding,
    Relu fusion, conv epilogue fusion (residual Add, Relu, Clip), Winograd convs,
    channel-shuffle folding, the transformer-layer fusions (attention scale, GELU,
    MatMul bias, skip LayerNorm). Returns (new NetDef, new params);
    neither input is modified. For a GPU `device` all but the first two, which lay out
    work for the CPU's kernels (FusedConv's epilogue is a numba loop; the transformer ops
    have no CUDA kernel), are left out: the CUDA convolutions run ConvRelu and the plain
    ops."""
    net, params = fold_batch_norm(net, params)
    net = fuse_activation(net)
    if device != "cpu":
        return net, params
    net = fuse_conv_epilogue(net, params)
    net, params = winograd_convs(net, params)
    return fuse_transformer(fold_channel_shuffle(net, params), params)


def _copy(net: NetDef) -> NetDef:
    out = NetDef()
    out.CopyFrom(net)
    return out


__all__ = [
    "fold_channel_shuffle",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_batch_norm",
    "fold_constants",
    "fuse_activation",
    "fuse_conv_epilogue",
    "fuse_elementwise",
    "fuse_transformer",
    "optimize",
    "rewrite_for_inference",
    "share_blobs",
    "winograd_convs",
]
