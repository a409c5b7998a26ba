"""brew normalization: spatial_bn (BatchNormalization) and layer_norm."""

from __future__ import annotations

from collections.abc import Sequence

from netbrew.brew.arg_scope import helper
from netbrew.brew.initializers import ConstantInit, Initializer, resolve
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.netdef.net import BlobReference


@helper
def spatial_bn(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    dim_in: int,
    *,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    is_test: bool = False,
    scale_init: Initializer | None = None,
    bias_init: Initializer | None = None,
    init_scale: float = 1.0,
    init_bias: float = 0.0,
) -> BlobReference:
    """Batch normalization over the channel axis (1).

    The scale and bias start at `init_scale` and `init_bias` (Caffe2's arguments) unless
    `scale_init` / `bias_init` give initializers.

    Training (is_test=False) normalises with the batch's statistics and updates the
    running ones in place: running = momentum * running + (1 - momentum) * batch.
    Inference uses the running statistics.

    Emits: BatchNormalization. Parameters: `{blob_out}_s` (WEIGHT, ones), `{blob_out}_b`
    (BIAS, zeros), `{blob_out}_rm` and `{blob_out}_rv` (COMPUTED: running mean, variance).
    """
    scale = model.create_param(
        f"{blob_out}_s", [dim_in], resolve(scale_init, ConstantInit(init_scale)), Tags.WEIGHT
    )
    bias = model.create_param(
        f"{blob_out}_b", [dim_in], resolve(bias_init, ConstantInit(init_bias)), Tags.BIAS
    )
    mean = model.create_param(f"{blob_out}_rm", [dim_in], ConstantInit(0.0), Tags.COMPUTED)
    var = model.create_param(f"{blob_out}_rv", [dim_in], ConstantInit(1.0), Tags.COMPUTED)
    inputs = [blob_in, scale, bias, mean, var]
    args = {"epsilon": epsilon, "momentum": momentum}
    if is_test:
        return model.net.BatchNormalization(inputs, blob_out, training_mode=0, **args)
    outputs = model.net.BatchNormalization(inputs, [blob_out, mean, var], training_mode=1, **args)
    return outputs[0]


@helper
def layer_norm(
    model: ModelHelper,
    blob_in: str,
    blob_out: str,
    dim_in: int | Sequence[int],
    *,
    axis: int = -1,
    epsilon: float = 1e-5,
    scale_init: Initializer | None = None,
    bias_init: Initializer | None = None,
) -> BlobReference:
    """Normalises over the axes from `axis` on, then scales and shifts.

    `dim_in` is the shape of those trailing axes (an int for one axis).
    Emits: LayerNormalization. Parameters: `{blob_out}_scale` (WEIGHT, ones),
    `{blob_out}_bias` (BIAS, zeros).
    """
    shape = [dim_in] if isinstance(dim_in, int) else list(dim_in)
    scale = model.create_param(
        f"{blob_out}_scale", shape, resolve(scale_init, ConstantInit(1.0)), Tags.WEIGHT
    )
    bias = model.create_param(
        f"{blob_out}_bias", shape, resolve(bias_init, ConstantInit()), Tags.BIAS
    )
    return model.net.LayerNormalization(
        [blob_in, scale, bias], blob_out, axis=axis, epsilon=epsilon
    )
