"""A port of Caffe2's MNIST tutorial (caffe2/tutorials), run unchanged in its Caffe2 calls
under `python -m netbrew.caffe2`: LeNet built with brew, trained with build_sgd, checked
by a test model that shares the trained weights (init_params=False), and run as a deploy
model. Data loading is the one change: the tutorial read MNIST from LMDB; this reads
netbrew's bundled UCI digits (8x8), scaled 3x and padded to MNIST's 28x28, as batches fed
with FeedBlob. Printed: train and test accuracy."""

import argparse
import os

import numpy as np
from caffe2.python import brew, model_helper, optimizer, workspace

from netbrew.data import load_digits

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=200)
parser.add_argument("--root", default=".")
args = parser.parse_args()
os.chdir(args.root)  # Print and Summarize write their logs here, as in the tutorial


def digits_as_mnist(seed=0):
    """Bundled 8x8 digits as 28x28 MNIST-like images in [0, 1], split 80/20."""
    images, labels = load_digits()
    big = np.kron(images.reshape(-1, 8, 8), np.ones((3, 3), np.float32))
    big = np.pad(big, ((0, 0), (2, 2), (2, 2)))[:, None] / big.max()
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(0.8 * len(labels))
    train, test = order[:cut], order[cut:]
    return big[train], labels[train], big[test], labels[test]


def add_lenet_model(model, data):
    conv1 = brew.conv(model, data, "conv1", dim_in=1, dim_out=20, kernel=5)
    pool1 = brew.max_pool(model, conv1, "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", dim_in=20, dim_out=50, kernel=5)
    pool2 = brew.max_pool(model, conv2, "pool2", kernel=2, stride=2)
    fc3 = brew.fc(model, pool2, "fc3", dim_in=50 * 4 * 4, dim_out=500)
    relu3 = brew.relu(model, fc3, "relu3")
    pred = brew.fc(model, relu3, "pred", dim_in=500, dim_out=10)
    return brew.softmax(model, pred, "softmax")


def add_accuracy(model, softmax, label):
    return brew.accuracy(model, [softmax, label], "accuracy")


def add_training_operators(model, softmax, label):
    xent = model.LabelCrossEntropy([softmax, label], "xent")
    loss = model.AveragedLoss(xent, "loss")
    add_accuracy(model, softmax, label)
    model.AddGradientOperators([loss])
    optimizer.build_sgd(model, base_learning_rate=0.1, policy="step", stepsize=1, gamma=0.999)


def add_bookkeeping_operators(model):
    model.Print("accuracy", [], to_file=1)
    model.Print("loss", [], to_file=1)
    for param in model.params:
        model.Summarize(param, [], to_file=1)
        model.Summarize(model.param_to_grad[param], [], to_file=1)


arg_scope = {"order": "NCHW"}
train_model = model_helper.ModelHelper(name="mnist_train", arg_scope=arg_scope)
softmax = add_lenet_model(train_model, "data")
add_training_operators(train_model, softmax, "label")
add_bookkeeping_operators(train_model)

test_model = model_helper.ModelHelper(name="mnist_test", arg_scope=arg_scope, init_params=False)
softmax = add_lenet_model(test_model, "data")
add_accuracy(test_model, softmax, "label")

deploy_model = model_helper.ModelHelper(name="mnist_deploy", arg_scope=arg_scope,
                                        init_params=False)  # fmt: skip
add_lenet_model(deploy_model, "data")

x_train, y_train, x_test, y_test = digits_as_mnist()
batch = 64
rng = np.random.default_rng(0)
workspace.FeedBlob("data", x_train[:batch])
workspace.FeedBlob("label", y_train[:batch].astype(np.int32))
workspace.RunNetOnce(train_model.param_init_net)
workspace.CreateNet(train_model.net, overwrite=True)
accuracy = np.zeros(args.iters)
for i in range(args.iters):
    pick = rng.choice(len(y_train), batch, replace=False)
    workspace.FeedBlob("data", x_train[pick])
    workspace.FeedBlob("label", y_train[pick].astype(np.int32))
    workspace.RunNet(train_model.net)
    accuracy[i] = workspace.blobs["accuracy"]
print(f"train accuracy (last 20 batches): {accuracy[-20:].mean():.3f}")

workspace.RunNetOnce(test_model.param_init_net)  # fills nothing: the weights stay trained
workspace.CreateNet(test_model.net, overwrite=True)
correct = 0
for start in range(0, len(y_test), batch):
    workspace.FeedBlob("data", x_test[start : start + batch])
    workspace.FeedBlob("label", y_test[start : start + batch].astype(np.int32))
    workspace.RunNet(test_model.net.Proto().name)
    correct += workspace.FetchBlob("accuracy") * len(y_test[start : start + batch])
print(f"test accuracy: {correct / len(y_test):.3f}")

workspace.RunNetOnce(deploy_model.param_init_net)
workspace.CreateNet(deploy_model.net, overwrite=True)
workspace.FeedBlob("data", x_test[:batch])
workspace.RunNet(deploy_model.net.Proto().name)
agree = workspace.FetchBlob("softmax").argmax(1) == y_test[:batch]
print(f"deploy accuracy (first batch): {agree.mean():.3f}")
print("params:", [str(p) for p in deploy_model.params])
print("optimizer state kept apart:", "optimizer_iteration" not in train_model.params)
print("logs written:", sorted(f for f in os.listdir(".") if f.endswith(".log"))[:3])
