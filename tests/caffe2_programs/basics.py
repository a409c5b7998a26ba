"""A port of Caffe2's Basics tutorial (caffe2/tutorials), run unchanged in its Caffe2 calls
under `python -m netbrew.caffe2`: workspaces and blobs, operators, nets, a first model
trained with SoftmaxWithLoss, and drawing a net. Printed lines are checked by the test."""

import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core, model_helper, net_drawer, workspace

np.random.seed(0)

# Workspaces and blobs.
x = np.random.rand(4, 3, 2)
workspace.FeedBlob("my_x", x)
print("fetched equals fed:", np.array_equal(workspace.FetchBlob("my_x"), x))
print("current workspace:", workspace.CurrentWorkspace())
workspace.SwitchWorkspace("gutentag", True)
print("blobs in gutentag:", workspace.Blobs())
workspace.SwitchWorkspace("default")
print("has my_x:", workspace.HasBlob("my_x"))
workspace.ResetWorkspace()
print("blobs after reset:", workspace.Blobs())
try:
    workspace.FetchBlob("invincible_pink_unicorn")
except RuntimeError as err:
    print("missing blob:", err)

# Operators.
op = core.CreateOperator("Relu", ["X"], ["Y"])
workspace.FeedBlob("X", np.random.randn(2, 3).astype(np.float32))
workspace.RunOperatorOnce(op)
print("relu ok:", np.array_equal(workspace.FetchBlob("Y"), np.maximum(workspace.FetchBlob("X"), 0)))
op = core.CreateOperator("GaussianFill", [], ["Z"], shape=[100, 100], mean=1.0, std=1.0)
workspace.RunOperatorOnce(op)
z = workspace.FetchBlob("Z")
print(f"gaussian mean {z.mean():.2f} std {z.std():.2f}")

# Nets.
net = core.Net("my_first_net")
X = net.GaussianFill([], ["X"], mean=0.0, std=1.0, shape=[2, 3], run_once=0)
W = net.GaussianFill([], ["W"], mean=0.0, std=1.0, shape=[5, 3], run_once=0)
b = net.ConstantFill([], ["b"], shape=[5], value=1.0, run_once=0)
Y = X.FC([W, b], ["Y"])
graph = net_drawer.GetPydotGraph(net, rankdir="LR")
print("drawn nodes:", len(graph.get_nodes()), "edges:", len(graph.get_edges()))
workspace.ResetWorkspace()
workspace.RunNetOnce(net)
print("blobs:", workspace.Blobs())
workspace.CreateNet(net)
for _ in range(2):
    workspace.RunNet(net.Proto().name)
y = workspace.FetchBlob("Y")
want = workspace.FetchBlob("X") @ workspace.FetchBlob("W").T + 1.0
print("fc ok:", np.allclose(y, want, atol=1e-6))

# A first model: FC, Sigmoid, SoftmaxWithLoss, trained by its gradients.
workspace.ResetWorkspace()
data = np.random.rand(16, 100).astype(np.float32)
label = (np.random.rand(16) * 10).astype(np.int32)
workspace.FeedBlob("data", data)
workspace.FeedBlob("label", label)
m = model_helper.ModelHelper(name="my first net")
weight = m.param_init_net.XavierFill([], "fc_w", shape=[10, 100])
bias = m.param_init_net.ConstantFill([], "fc_b", shape=[10])
fc_1 = m.net.FC(["data", "fc_w", "fc_b"], "fc1")
pred = m.net.Sigmoid(fc_1, "pred")
softmax, loss = m.net.SoftmaxWithLoss([pred, "label"], ["softmax", "loss"])
grads = m.AddGradientOperators([loss])
print("gradient of fc_w:", grads["fc_w"])
workspace.RunNetOnce(m.param_init_net)
workspace.CreateNet(m.net)
workspace.RunNet(m.net.Proto().name, 10)
print("softmax rows sum to 1:", np.allclose(workspace.FetchBlob("softmax").sum(1), 1, atol=1e-5))
print(f"loss {float(workspace.FetchBlob('loss')):.4f}")

# A net written for a GPU runs on the CPU here, with one warning.
with core.DeviceScope(core.DeviceOption(caffe2_pb2.CUDA, 0)):
    gpu_net = core.Net("gpu_net")
    gpu_net.Relu("data", "data_relu")
workspace.RunNetOnce(gpu_net)
print("gpu net ran on cpu:", workspace.FetchBlob("data_relu").shape)
