"""BatchNormalization folding: an inference BN after Conv, Gemm or FC goes into its weights,
and so does a chain of them and of Mul, Add and Sub by per-output-channel constants (Caffe2
nets scale and shift after their BN that way); a BN with no such op before it takes the
chain after it into its own scale and bias."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.netdef.args import args_dict, set_args
from netbrew.netdef.passes._graph import can_write_early, copy_net, readers, sole_reader
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

FOLDABLE = ("Conv", "Gemm", "FC")


def _bn_factors(bn: OperatorDef, params: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, t) with BN(y) = s * y + t per channel, or None when BN is not foldable."""
    args = args_dict(bn.arg)
    if args.get("training_mode", 0) or any(bn.output[1:]) or len(bn.input) != 5:
        return None
    if not all(b in params for b in bn.input[1:]):
        return None
    scale, bias, mean, var = (np.asarray(params[b], np.float64) for b in bn.input[1:])
    s = scale / np.sqrt(var + args.get("epsilon", 1e-5))
    return s, bias - s * mean


AFFINE = ("Mul", "Add", "Sub")


def _output_layout(op: OperatorDef, params: dict) -> tuple[int, int]:
    """(rank, output channels) of a foldable op's output, from its weight."""
    w = np.asarray(params[op.input[1]])
    if op.type == "Conv":
        return w.ndim, w.shape[0]
    if op.type == "FC":
        return 2, w.shape[0]
    return 2, w.shape[0 if args_dict(op.arg).get("transB", 0) else 1] if w.ndim == 2 else -1


def _per_channel(value, channels: int, rank: int, dtype) -> np.ndarray | None:
    """`value` as (channels,) float64 if it broadcasts against a rank-`rank` output along
    its channel axis (1) alone, without growing the output; else None."""
    v = np.asarray(value)
    if v.dtype != dtype or v.ndim > rank:
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if shape[0] != 1 or shape[1] not in (1, channels) or any(d != 1 for d in shape[2:]):
        return None
    return np.broadcast_to(v.reshape(-1).astype(np.float64), (channels,))


def _step_factors(
    step: OperatorDef, src: str, params: dict, layout: tuple[int, int], dtype
) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, t) with step(y) = s * y + t per channel, for a BN or a Mul/Add/Sub of `src` (the
    chain's running output y) by a per-channel constant; None when it does not fold."""
    if step.type == "BatchNormalization":
        factors = _bn_factors(step, params) if step.input[0] == src else None
        return factors if factors is not None and factors[0].size == layout[1] else None
    if step.type not in AFFINE or len(step.input) != 2 or list(step.input).count(src) != 1:
        return None
    if step.type == "Sub" and step.input[0] != src:
        return None
    const = step.input[1] if step.input[0] == src else step.input[0]
    c = _per_channel(params[const], layout[1], layout[0], dtype) if const in params else None
    if c is None:
        return None
    one, zero = np.ones_like(c), np.zeros_like(c)
    return {"Mul": (c, zero), "Add": (one, c), "Sub": (one, -c)}[step.type]


def _fold(op: OperatorDef, s: np.ndarray, t: np.ndarray, params: dict):
    """New (weight, bias, extra args) of `op` with the BN folded in, or None."""
    args = args_dict(op.arg)
    w = np.asarray(params[op.input[1]])
    b = params.get(op.input[2]) if len(op.input) > 2 and op.input[2] else None
    if len(op.input) > 2 and op.input[2] and b is None:
        return None
    b = np.zeros(s.shape) if b is None else np.asarray(b, np.float64)
    w64 = w.astype(np.float64)
    extra: dict[str, Any] = {}
    if op.type == "Conv":
        if w.shape[0] != s.size or b.size != s.size:
            return None
        w64 = w64 * s.reshape((-1,) + (1,) * (w.ndim - 1))
        b = s * b.reshape(-1) + t
    elif op.type == "FC":
        if args.get("axis", 1) != 1 or w.size % s.size or b.size != s.size:
            return None
        w64 = (w64.reshape(s.size, -1) * s[:, None]).reshape(w.shape)
        b = s * b.reshape(-1) + t
    else:  # Gemm: Y = alpha * A' @ B' + beta * C, output channels are B's columns
        trans_b = args.get("transB", 0)
        if w.ndim != 2 or w.shape[0 if trans_b else 1] != s.size or b.size not in (1, s.size):
            return None
        if b.ndim == 2 and b.shape[1] != b.size:  # an (M, 1) bias varies by row, not channel
            return None
        w64 = w64 * (s[:, None] if trans_b else s[None, :])
        b = s * (args.get("beta", 1.0) * np.broadcast_to(b.reshape(-1), s.shape)) + t
        extra["beta"] = 1.0
    return w64.astype(w.dtype), b.astype(w.dtype), extra


def _affine_chain(net: NetDef, i: int, used, live_out, params: dict, layout, dtype):
    """(S, T, steps): the ops after net.op[i], each the sole reader of the one before, that
    are per-channel affine steps (`_step_factors`), composed into y -> S * y + T; (None,
    None, []) when the first is not."""
    scale, shift, chain, current = None, None, [], i
    while (j := sole_reader(net, used, live_out, current)) is not None:
        step = _step_factors(net.op[j], net.op[current].output[0], params, layout, dtype)
        if step is None:
            break
        s, t = step
        scale, shift = (s, t) if scale is None else (s * scale, s * shift + t)
        chain.append(j)
        current = j
    return scale, shift, chain


def _fold_into_bn(net: NetDef, i: int, used, live_out, params: dict, rank: int):
    """(new BN, folded step indices, new params) for the inference BatchNormalization
    net.op[i] with the chain of per-channel Mul/Add/Sub (and BN) steps after it folded into
    its scale and bias, or None. S * BN(x) + T is BN with scale S * scale and bias
    S * bias + T. The input's rank must be known (value_info) to tell a per-channel
    constant from one that broadcasts along another axis."""
    bn = net.op[i]
    factors = _bn_factors(bn, params)
    if factors is None or rank < 2:
        return None
    scale_name, bias_name = bn.input[1], bn.input[2]
    dtype = np.asarray(params[scale_name]).dtype
    layout = (rank, factors[0].size)
    big_s, big_t, chain = _affine_chain(net, i, used, live_out, params, layout, dtype)
    if not chain or not can_write_early(net, i, chain[-1], net.op[chain[-1]].output[0]):
        return None
    scale = np.broadcast_to(np.asarray(params[scale_name], np.float64).reshape(-1), big_s.shape)
    bias = np.broadcast_to(np.asarray(params[bias_name], np.float64).reshape(-1), big_s.shape)
    s_name = _unique(f"{scale_name}_chainfolded", params)
    b_name = _unique(f"{bias_name}_chainfolded", {**params, s_name: None})
    names = {s_name: (big_s * scale).astype(dtype), b_name: (big_s * bias + big_t).astype(dtype)}
    new = OperatorDef()
    new.CopyFrom(bn)
    new.input[1], new.input[2] = names
    new.output[0] = net.op[chain[-1]].output[0]
    return new, chain, names


def _unique(name: str, taken: dict) -> str:
    """`name`, or `name_1`, `name_2`... where a blob already has it."""
    out, k = name, 0
    while out in taken:
        k += 1
        out = f"{name}_{k}"
    return out


def fold_batch_norm(net: NetDef, params: dict) -> tuple[NetDef, dict]:
    """Folds each inference BatchNormalization into the Conv, Gemm or FC before it, with
    any chain of BNs and Mul/Add/Sub by per-channel constants that follows.

    BN(y) = s * y + t with s = scale / sqrt(var + epsilon) and t = B - s * mean, per
    output channel; Mul, Add and Sub by a constant of `params` that varies along the
    channel axis only (shape (1, M, 1, 1), (M, 1, 1), a scalar...) are s * y + t too. Each
    step folds when training_mode=0 (BN), it alone reads the previous step's output (not a
    net output), and its values are all in `params`; the composed `W' = s * W` (per output
    channel) and `b' = s * b + t`. The op then writes the last step's output and the steps
    disappear.

    Args:
        net: the NetDef; not modified.
        params: blob name -> value of the parameters.

    Returns:
        (new_net, new_params): the new weights are named `<w>_bnfolded` and `<b>_bnfolded`
        (`<w>_bnfolded_bias` when the op had no bias); parameters no longer read are left
        out of new_params and of the net's external inputs. An inference BN that no op
    before it takes (DenseNet's, on a Concat) takes the per-channel chain after it into
    its own scale and bias instead (`<scale>_chainfolded`, `<bias>_chainfolded`), where
    the net's value_info gives its input's rank.
    """
    used, live_out = readers(net)
    new_params = dict(params)
    replaced: dict[int, OperatorDef] = {}
    dropped: set[int] = set()
    added: list[str] = []
    for i, op in enumerate(net.op):
        if op.type not in FOLDABLE or len(op.input) < 2 or op.input[1] not in params:
            continue
        layout, dtype = _output_layout(op, params), np.asarray(params[op.input[1]]).dtype
        if layout[1] < 1:
            continue
        scale, shift, chain = _affine_chain(net, i, used, live_out, params, layout, dtype)
        if not chain:
            continue
        last = net.op[chain[-1]]
        if not can_write_early(net, i, chain[-1], last.output[0]):
            continue
        folded = _fold(op, scale, shift, params)
        if folded is None:
            continue
        w, b, extra = folded
        # unique: ops sharing a weight each fold their own BN into their own copy
        w_name = _unique(f"{op.input[1]}_bnfolded", new_params)
        has_bias = len(op.input) > 2 and op.input[2]
        b_name = f"{op.input[2]}_bnfolded" if has_bias else f"{op.input[1]}_bnfolded_bias"
        b_name = _unique(b_name, {**new_params, w_name: None})
        new = OperatorDef()
        new.CopyFrom(op)
        new.input[1] = w_name
        if has_bias:
            new.input[2] = b_name
        else:
            del new.input[2:]
            new.input.append(b_name)
        new.output[0] = last.output[0]
        for arg in [a for a in new.arg if a.name in extra]:
            new.arg.remove(arg)
        set_args(new, extra)
        new_params[w_name], new_params[b_name] = w, b
        if op.input[1] in net.external_input:
            added += [w_name, b_name]
        replaced[i] = new
        dropped.update(chain)
    ranks = {info.name: len(info.dims) for info in net.value_info if not info.unknown_shape}
    for i, op in enumerate(net.op):
        if op.type != "BatchNormalization" or i in dropped or i in replaced:
            continue
        folded_bn = _fold_into_bn(net, i, used, live_out, new_params, ranks.get(op.input[0], 0))
        if folded_bn is not None:
            new, chain, names = folded_bn
            new_params.update(names)
            if op.input[1] in net.external_input:
                added += list(names)
            replaced[i] = new
            dropped.update(chain)
    ops = [replaced.get(i, op) for i, op in enumerate(net.op) if i not in dropped]
    out = copy_net(net, ops)
    read = {b for op in ops for b in [*op.input, *op.control_input]}
    gone = {b for op in net.op for b in op.input if b in params} - read
    del out.external_input[:]
    out.external_input.extend(
        [b for b in net.external_input if b not in gone or b in net.external_output] + added
    )
    return out, {k: v for k, v in new_params.items() if k not in gone}
