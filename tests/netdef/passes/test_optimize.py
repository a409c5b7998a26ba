"""optimize applies the passes by level and keeps the numbers."""

import numpy as np
from _nets import conv_bn_net, count, run

from netbrew.netdef import optimize


def test_levels():
    net, params, feeds = conv_bn_net()
    expected = run(net, {**feeds, **params})[0]
    assert optimize(net, level=0).SerializeToString() == net.SerializeToString()
    for level in (1, 2):
        out, new_params = optimize(net, level=level, params=params)
        np.testing.assert_allclose(run(out, {**feeds, **new_params})[0], expected, atol=1e-4)
    assert count(out, "BatchNormalization") == 0 and count(out, "Relu") == 0
    assert len(out.op) == 3  # ConvRelu, FCRelu, FC
