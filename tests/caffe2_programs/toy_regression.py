"""A port of Caffe2's Toy Regression tutorial (caffe2/tutorials), run unchanged in its
Caffe2 calls under `python -m netbrew.caffe2`: a linear model y = Wx + B learns
W = [2.0, 1.5], B = 0.5 from noisy samples that a GaussianFill in the training net draws
on every run. Printed: the learned and the true parameters."""

import numpy as np
from caffe2.python import core, workspace

init_net = core.Net("init")
W_gt = init_net.GivenTensorFill([], "W_gt", shape=[1, 2], values=[2.0, 1.5])
B_gt = init_net.GivenTensorFill([], "B_gt", shape=[1], values=[0.5])
ONE = init_net.ConstantFill([], "ONE", shape=[1], value=1.0)
ITER = init_net.ConstantFill([], "ITER", shape=[1], value=0, dtype=core.DataType.INT32)
W = init_net.UniformFill([], "W", shape=[1, 2], min=-1.0, max=1.0)
B = init_net.ConstantFill([], "B", shape=[1], value=0.0)

train_net = core.Net("train")
X = train_net.GaussianFill([], "X", shape=[64, 2], mean=0.0, std=1.0, run_once=0)
Y_gt = X.FC([W_gt, B_gt], "Y_gt")
noise = train_net.GaussianFill([], "noise", shape=[64, 1], mean=0.0, std=1.0, run_once=0)
Y_noise = Y_gt.Add(noise, "Y_noise")
Y_noise = Y_noise.StopGradient([], "Y_noise")
Y_pred = X.FC([W, B], "Y_pred")
dist = train_net.SquaredL2Distance([Y_noise, Y_pred], "dist")
loss = dist.AveragedLoss([], ["loss"])
gradient_map = train_net.AddGradientOperators([loss])
train_net.Iter(ITER, ITER)
LR = train_net.LearningRate(ITER, "LR", base_lr=-0.1, policy="step", stepsize=20, gamma=0.9)
train_net.WeightedSum([W, ONE, gradient_map[W], LR], W)
train_net.WeightedSum([B, ONE, gradient_map[B], LR], B)

workspace.RunNetOnce(init_net)
workspace.CreateNet(train_net)
for _ in range(100):
    workspace.RunNet(train_net.Proto().name)

print("W", np.array2string(workspace.FetchBlob("W").ravel(), precision=6))
print("B", np.array2string(workspace.FetchBlob("B").ravel(), precision=6))
print("W_gt", np.array2string(workspace.FetchBlob("W_gt").ravel(), precision=6))
print("B_gt", np.array2string(workspace.FetchBlob("B_gt").ravel(), precision=6))
print("ITER", int(workspace.FetchBlob("ITER")[0]))
