"""nn.Module-style frontend that traces into NetDefs.

Layers keep PyTorch's names, constructor arguments, defaults, initialisation, state_dict
keys and printing. They run eagerly on NumPy arrays through the operator registry (the
same kernels a NetDef runs), and `netbrew.converters.module.trace` records them as
(init_net, predict_net):

    >>> from netbrew import nn
    >>> from netbrew.converters.module import trace
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    >>> model(np.ones((2, 4), np.float32)).shape
    (2, 3)
    >>> init_net, predict_net = trace(model, np.ones((2, 4), np.float32))
"""

from netbrew.nn import functional, init
from netbrew.nn._dispatch import manual_seed
from netbrew.nn._tracer import TracedValue, TracerWarning, TracingError
from netbrew.nn.activation import GELU, ReLU, Sigmoid, Softmax, Tanh
from netbrew.nn.containers import ModuleDict, ModuleList, Sequential
from netbrew.nn.conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from netbrew.nn.linear import Embedding, Identity, Linear
from netbrew.nn.module import IncompatibleKeys, Module, StateDictError
from netbrew.nn.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, LayerNorm
from netbrew.nn.parameter import Parameter
from netbrew.nn.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from netbrew.nn.shape import Dropout, Flatten

__all__ = [
    "GELU",
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "MaxPool2d",
    "Module",
    "ModuleDict",
    "ModuleList",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "StateDictError",
    "Tanh",
    "TracedValue",
    "TracerWarning",
    "TracingError",
    "functional",
    "init",
    "manual_seed",
]
