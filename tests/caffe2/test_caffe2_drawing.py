"""net_drawer's pydot graphs (from netbrew.netdef.dataflow) and visualize's image grids."""

import numpy as np
import pytest

from netbrew.caffe2.python import core, net_drawer, visualize
from netbrew.netdef.dataflow import blob_dataflow, op_dataflow


def small_net():
    net = core.Net("draw")
    net.Relu("x", "y")
    net.Relu("y", "y")  # in place: a second node for y, not a cycle
    net.Add(["y", "x"], "z")
    return net


def test_blob_graph_versions_blobs_written_again():
    flow = blob_dataflow(small_net())
    assert ("op:1", "blob:y#1") in flow.edges and ("blob:y", "op:1") in flow.edges
    assert ("blob:y#1", "op:2") in flow.edges and ("blob:x", "op:2") in flow.edges
    assert flow.nodes["op:2"] == ("op", "#2 Add")


def test_minimal_graph_links_ops_by_what_they_read():
    assert op_dataflow(small_net()).edges == [("op:0", "op:1"), ("op:1", "op:2")]


def test_pydot_graphs():
    pytest.importorskip("pydot")
    graph = net_drawer.GetPydotGraph(small_net(), rankdir="TB")
    assert len(graph.get_nodes()) == 7 and len(graph.get_edges()) == 7
    minimal = net_drawer.GetPydotGraphMinimal(small_net().Proto().op, name="ops")
    assert minimal.get_name() == "ops" and len(minimal.get_edges()) == 2
    assert 'label="#2 Add"' in minimal.to_string()


def test_tile_lays_images_out_in_a_grid():
    images = np.stack([np.full((2, 3), k, np.float32) for k in range(5)])
    images[:, 0, 0] = -1
    grid = visualize.tile(images, ncols=3)
    assert grid.shape == (2 * 3 - 1 + 0, 3 * 4 - 1)
    assert grid[0, 0] == 0 and grid[1, 1] == 1  # each image scaled to [0, 1]
