"""The module-level workspace: blobs, workspaces, operators and nets as Caffe2 took them."""

import numpy as np
import pytest

from netbrew.caffe2.proto import caffe2_pb2
from netbrew.caffe2.python import core, workspace
from netbrew.errors import DeviceFallbackWarning


def test_blobs_round_trip_and_the_blobs_mapping():
    workspace.FeedBlob("a", [1, 2, 3])
    workspace.blobs["b"] = np.ones(2, np.float32)
    assert workspace.FetchBlob("a").tolist() == [1, 2, 3]
    assert "b" in workspace.blobs and len(workspace.blobs) == 2
    assert sorted(workspace.blobs) == workspace.Blobs() == ["a", "b"]
    assert workspace.blobs["b"].dtype == np.float32
    workspace.RemoveBlob("a")
    assert not workspace.HasBlob("a")


def test_a_missing_blob_is_a_runtime_error_that_suggests_names():
    workspace.FeedBlob("gpu_0/data", np.zeros(1))
    with pytest.raises(RuntimeError, match="'data' is not in the workspace. Did you mean: gpu_0"):
        workspace.FetchBlob("data")
    with pytest.raises(KeyError):  # also netbrew's BlobNotFoundError
        workspace.FetchBlob("nothing")
    net = core.Net("reads_missing")
    net.Relu("absent", "y")
    with pytest.raises(RuntimeError, match="absent"):
        workspace.RunNetOnce(net)


def test_workspaces_switch_and_keep_their_blobs():
    workspace.FeedBlob("x", np.zeros(1))
    workspace.SwitchWorkspace("other", True)
    assert workspace.CurrentWorkspace() == "other" and workspace.Blobs() == []
    with pytest.raises(RuntimeError, match="'missing' does not exist"):
        workspace.SwitchWorkspace("missing")
    workspace.SwitchWorkspace("default")
    assert workspace.Blobs() == ["x"]
    assert "other" in workspace.Workspaces()


def test_nets_created_once_and_run_by_name_object_or_bytes():
    net = core.Net("counter")
    net.Add(["x", "one"], "x")
    workspace.FeedBlob("x", np.zeros(1, np.float32))
    workspace.FeedBlob("one", np.ones(1, np.float32))
    workspace.CreateNet(net)
    workspace.CreateNetOnce(net)  # no error: it exists
    workspace.RunNet(net, num_iter=3)
    workspace.RunNet(net.Name())
    assert workspace.FetchBlob("x").tolist() == [4.0]
    assert net.Name() in workspace.Nets()
    workspace.RunNetOnce(net.Proto().SerializeToString())
    assert workspace.FetchBlob("x").tolist() == [5.0]


def test_a_net_in_caffe2_spellings_from_a_file_is_translated():
    proto = caffe2_pb2.NetDef(name="legacy")
    op = proto.op.add(type="MaxPool", input=["x"], output=["y"])
    op.arg.add(name="kernel", i=2)
    op.arg.add(name="stride", i=2)
    op.arg.add(name="order", s=b"NCHW")
    workspace.FeedBlob("x", np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    workspace.RunNetOnce(proto)
    assert workspace.FetchBlob("y").ravel().tolist() == [5.0, 7.0, 13.0, 15.0]


def test_feeding_a_gpu_blob_without_a_gpu_warns_and_feeds_the_cpu():
    with pytest.warns(DeviceFallbackWarning, match="FeedBlob"):
        workspace.FeedBlob("g", np.ones(2), device_option=core.DeviceOption(caffe2_pb2.CUDA, 0))
    assert workspace.FetchBlob("g").tolist() == [1.0, 1.0]
    assert workspace.NumCudaDevices() == 0
