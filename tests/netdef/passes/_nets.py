"""Small nets and a runner shared by the pass tests."""

import numpy as np

from netbrew import brew
from netbrew.brew import ModelHelper
from netbrew.executor import Workspace
from netbrew.netdef.model_dir import inference_net


def run(net, feeds, outputs=None):
    """Runs `net` on `feeds` in a fresh Workspace; returns its external outputs."""
    ws = Workspace()
    for name, value in feeds.items():
        ws.feed_blob(name, value)
    ws.run_net_once(net)
    return [ws.fetch_blob(b) for b in (outputs or net.external_output)]


def assert_same(before, after, feeds, atol=1e-5):
    for a, b in zip(run(before, feeds), run(after, feeds), strict=True):
        np.testing.assert_allclose(b, a, atol=atol, rtol=atol)


def count(net, op_type):
    return sum(op.type == op_type for op in net.op)


def conv_bn_net(seed=0):
    """conv -> BN -> relu -> fc -> relu -> fc, with nontrivial BN statistics.

    Returns:
        (net, params, feeds)
    """
    model = ModelHelper("convbn", seed=seed)
    c = brew.conv(model, "data", "c1", 3, 4, kernel=3, pad=1)
    r = brew.relu(model, brew.spatial_bn(model, c, "bn1", 4, is_test=True), "r1")
    f = brew.relu(model, brew.fc(model, r, "fc1", 4 * 5 * 5, 8), "r2")
    brew.fc(model, f, "fc2", 8, 3)
    net = inference_net(model.net, ["data"], ["fc2"])
    ws = Workspace()
    ws.run_net_once(model.param_init_net)
    rng = np.random.default_rng(seed)
    params = {}
    for b in net.external_input[1:]:
        shape = ws.fetch_blob(b).shape
        value = rng.uniform(0.5, 1.5, shape) if b.endswith("_rv") else rng.normal(size=shape)
        params[b] = value.astype(np.float32)
    feeds = {"data": rng.normal(size=(2, 3, 5, 5)).astype(np.float32)}
    return net, params, feeds
