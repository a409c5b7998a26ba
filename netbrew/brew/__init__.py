"""brew: helpers that add parameters and ops to a ModelHelper, one file per family.

from netbrew import brew
from netbrew.brew import ModelHelper

model = ModelHelper(name="lenet")
conv1 = brew.conv(model, "data", "conv1", dim_in=1, dim_out=20, kernel=5)
pool1 = brew.max_pool(model, conv1, "pool1", kernel=2, stride=2)
fc = brew.fc(model, pool1, "fc", dim_in=20 * 12 * 12, dim_out=10)
prob = brew.softmax(model, fc, "prob")
"""

from netbrew.brew import optimizer
from netbrew.brew.arg_scope import arg_scope
from netbrew.brew.arrays import concat, flatten, reshape, sum, transpose
from netbrew.brew.conv import conv, conv_transpose
from netbrew.brew.db_input import db_input
from netbrew.brew.dropout import dropout
from netbrew.brew.fc import fc
from netbrew.brew.initializers import (
    ConstantInit,
    FromArray,
    GaussianInit,
    Initializer,
    MSRAInit,
    XavierInit,
)
from netbrew.brew.model_helper import ModelHelper, Tags
from netbrew.brew.nonlinearity import leaky_relu, prelu, relu, sigmoid, softmax, tanh
from netbrew.brew.normalization import layer_norm, spatial_bn
from netbrew.brew.pooling import average_pool, global_avg_pool, global_max_pool, max_pool
from netbrew.brew.train import accuracy, add_weight_decay, iter, softmax_with_loss

__all__ = [
    "ConstantInit",
    "FromArray",
    "GaussianInit",
    "Initializer",
    "MSRAInit",
    "ModelHelper",
    "Tags",
    "XavierInit",
    "accuracy",
    "add_weight_decay",
    "arg_scope",
    "average_pool",
    "concat",
    "conv",
    "conv_transpose",
    "db_input",
    "dropout",
    "fc",
    "flatten",
    "global_avg_pool",
    "global_max_pool",
    "iter",
    "layer_norm",
    "leaky_relu",
    "max_pool",
    "optimizer",
    "prelu",
    "relu",
    "reshape",
    "sigmoid",
    "softmax",
    "softmax_with_loss",
    "spatial_bn",
    "sum",
    "tanh",
    "transpose",
]
