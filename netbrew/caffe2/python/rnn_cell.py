"""caffe2.python.rnn_cell on netbrew: LSTM as one ONNX LSTM op.

Caffe2 unrolled its LSTMCell into a RecurrentNetwork op; netbrew runs ONNX's LSTM, which
has backpropagation through time (netbrew.operators.rnn_grad), and carries each
sequence's last hidden state through the padded steps of hidden_t_all, as LSTMUnit did.
"""

from __future__ import annotations

from typing import Any

from netbrew.brew.initializers import ConstantInit, FromArray, XavierInit
from netbrew.brew.model_helper import Tags
from netbrew.netdef.net import BlobReference
from netbrew.netdef.scope import canonical_scope, current_name_scope, name_scope


def LSTM(  # noqa: N802
    model: Any,
    input_blob: str,
    seq_lengths: str,
    initial_states: tuple[str, str],
    dim_in: int,
    dim_out: int,
    scope: str | None = None,
    outputs_with_grads: Any = (0,),
    return_params: bool = False,
    memory_optimization: bool = False,
    forget_bias: float = 0.0,
    forward_only: bool = False,
    drop_states: bool = False,
    return_last_layer_only: bool = True,
    static_rnn_unroll_size: int | None = None,
    **cell_kwargs: Any,
):
    """One LSTM layer over input_blob (T, N, dim_in) from states (1, N, dim_out).

    Returns:
        (hidden_all (T, N, H), hidden_last (1, N, H), cell_all, cell_last (1, N, H)), plus
        the parameter blobs {"W", "R", "B"} when return_params. ONNX's LSTM returns no
        cell state per step, so `cell_all` names a blob that nothing writes: reading it
        raises BlobNotFound rather than giving wrong values.
    """
    if isinstance(dim_out, (list, tuple)):
        if len(dim_out) != 1:
            raise NotImplementedError(f"rnn_cell.LSTM: stacked layers {dim_out}; use one layer")
        (dim_out,) = dim_out
    if cell_kwargs or drop_states or static_rnn_unroll_size:
        raise NotImplementedError(f"rnn_cell.LSTM: options {sorted(cell_kwargs)} not supported")
    # The inputs are named in the caller's scope; params and outputs in the LSTM's.
    x, lengths, h0, c0 = (
        b if isinstance(b, BlobReference) else BlobReference(current_name_scope() + b)
        for b in (input_blob, seq_lengths, *initial_states)
    )
    hid = int(dim_out)
    bias = [0.0] * (8 * hid)
    bias[2 * hid : 3 * hid] = [float(forget_bias)] * hid  # ONNX's gates: i o f c
    with name_scope(scope or "LSTM"), canonical_scope():
        w = model.create_param("W", [1, 4 * hid, dim_in], XavierInit(), Tags.WEIGHT)
        r = model.create_param("R", [1, 4 * hid, hid], XavierInit(), Tags.WEIGHT)
        b = model.create_param("B", [1, 8 * hid], _bias(bias, forget_bias), Tags.BIAS)
        y, h_last, c_last = model.net.LSTM(
            [x, w, r, b, lengths, h0, c0],
            ["hidden_t_all_4d", "hidden_t_last", "cell_t_last"],
            hidden_size=hid,
        )
        y = model.net.Squeeze([y, _axes(model)], "hidden_t_all_padded")
        hidden_all = _carry_last(model, y, lengths, h_last)
        cell_all = BlobReference(str(c_last).replace("cell_t_last", "cell_t_all"), model.net)
    outputs = (hidden_all, h_last, cell_all, c_last)
    return (*outputs, {"W": w, "R": r, "B": b}) if return_params else outputs


def _carry_last(model: Any, y: Any, lengths: Any, h_last: Any) -> BlobReference:
    """hidden_t_all as Caffe2's LSTMUnit leaves it: past a sequence's length the hidden
    state stays the last valid one (ONNX's Y is zero there); Where(t < len[n], Y, Y_h)."""
    import numpy as np

    net = model.net
    steps = net.Gather([net.Shape(y, "lstm_y_shape"), _constant(model, "lstm_t_axis", 0)],
                       "lstm_steps")  # fmt: skip
    zero, one = _constant(model, "lstm_zero", 0), _constant(model, "lstm_one", 1)
    t = net.Unsqueeze([net.Range([zero, steps, one], "lstm_t"), one], "lstm_t_col")
    wide = net.Cast(lengths, "lstm_lengths64", to=np.int64)
    valid = net.Less([t, net.Unsqueeze([wide, zero], "lstm_lengths_row")], "lstm_valid")
    mask = net.Unsqueeze([valid, _constant(model, "lstm_h_axis", [2])], "lstm_valid3")
    return net.Where([mask, y, h_last], "hidden_t_all")


def _constant(model: Any, name: str, value: Any) -> BlobReference:
    import numpy as np

    return model.add_constant(name, np.array(value, np.int64))


def _bias(values: list[float], forget_bias: float):
    import numpy as np

    return FromArray(np.array([values], np.float32)) if forget_bias else ConstantInit(0.0)


def _axes(model: Any) -> BlobReference:
    """The constant [1] that squeezes Y's direction axis."""
    return _constant(model, "lstm_direction_axis", [1])
