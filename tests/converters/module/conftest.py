"""Nets and helpers shared by the module-converter tests (to_module and to_torch alike)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.converters.module.from_torch import add_fill
from netbrew.demo import lenet
from netbrew.executor import Workspace
from netbrew.proto.netbrew_pb2 import NetDef


@pytest.fixture
def lenet_nets() -> tuple[NetDef, NetDef]:
    """brew's LeNet with a softmax head (Caffe2-style names conv1_w, ...): (init, predict)."""
    model = ModelHelper(name="lenet", seed=0)
    brew.softmax(model, lenet(model), "softmax")
    return model.param_init_net.proto(), model.net.proto()


@pytest.fixture
def conv_bn_nets() -> tuple[NetDef, NetDef]:
    """brew conv1 (no bias) -> spatial_bn bn1 (test mode) -> relu -> fc: (init, predict)."""
    model = ModelHelper(name="convbn", seed=0)
    conv = brew.conv(model, "data", "conv1", 3, 8, kernel=3, pad=1, no_bias=True)
    bn = brew.spatial_bn(model, conv, "bn1", 8, is_test=True)
    brew.fc(model, brew.relu(model, bn, "relu1"), "fc", 8 * 4 * 4, 5)
    return model.param_init_net.proto(), model.net.proto()


def _given(init: NetDef, name: str, array) -> None:
    add_fill(init, name, np.asarray(array, dtype=np.float32))


@pytest.fixture
def given() -> Callable[[NetDef, str, object], None]:
    """given(init, name, array): the init net fills blob `name` with float32 `array`."""
    return _given


def _run_predict(
    predict: NetDef,
    feeds: Mapping,
    *,
    init: NetDef | None = None,
    state: Mapping | None = None,
) -> dict[str, np.ndarray]:
    ws = Workspace()
    if init is not None:
        ws.run_net_once(init)
    for key, value in {**(state or {}), **feeds}.items():
        ws.feed_blob(key, np.asarray(value))
    ws.run_net_once(predict)
    return {o: ws.fetch_blob(o) for o in (predict.external_output or predict.op[-1].output)}


@pytest.fixture
def run_predict() -> Callable[..., dict[str, np.ndarray]]:
    """run_predict(predict, feeds, init=None, state=None): the predict net run by netbrew's
    executor after `init`, or on the `state` blobs (a module's state_dict, NumPy or torch),
    fed with `feeds`; returns its outputs (external outputs, else the last op's)."""
    return _run_predict
