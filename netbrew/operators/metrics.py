"""Accuracy, Caffe2's classification metric."""

from __future__ import annotations

import numpy as np

from netbrew.errors import ShapeError
from netbrew.operators.losses import check_labels
from netbrew.operators.schema import kernel, no_gradient, schema

schema(
    "Accuracy",
    inputs=["predictions", "labels"],
    outputs=["accuracy"],
    attrs={"top_k": 1},
    dtypes={0: "numeric", 1: "int"},
    onnx=False,
    doc="accuracy = mean_i(rank of predictions[i, labels[i]] <= top_k), a float32 scalar; "
    "predictions [N, D], labels int [N]; ties rank the lower class first, as Caffe2; "
    "default top_k=1",
)
no_gradient("Accuracy", "a count of correct predictions is piecewise constant")


@kernel("Accuracy")
def accuracy_cpu(predictions: np.ndarray, labels: np.ndarray, *, top_k: int) -> tuple[np.ndarray]:
    if predictions.ndim != 2:
        raise ShapeError(
            f"Accuracy: input 'predictions' has {predictions.ndim} dims, expected 2 (N, D)"
        )
    n, d = predictions.shape
    if labels.shape not in ((n,), (n, 1)):
        raise ShapeError(f"Accuracy: input 'labels' has shape {list(labels.shape)}, expected [{n}]")
    if top_k < 1:
        raise ValueError(f"Accuracy: argument 'top_k' is {top_k}, expected >= 1")
    labels = check_labels(labels.reshape(-1), d, "Accuracy")
    at_label = predictions[np.arange(n), labels][:, None]
    before = (predictions > at_label) | (
        (predictions == at_label) & (np.arange(d) < labels[:, None])
    )
    correct = np.count_nonzero(before.sum(axis=1) < top_k)
    return (np.asarray(correct / n if n else np.nan, np.float32),)  # Caffe2: 0 / 0
