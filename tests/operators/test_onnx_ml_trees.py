"""TreeEnsemble against a per-sample recursive walk."""

import math

import numpy as np
import pytest

from netbrew.errors import OperatorError
from netbrew.operators.activations import normal_cdf
from netbrew.testing import check_op, run_op

COMPARE = [
    lambda v, s: v <= s,
    lambda v, s: v < s,
    lambda v, s: v >= s,
    lambda v, s: v > s,
    lambda v, s: v == s,
    lambda v, s: v != s,
]


def walk_reference(x, a, n_targets, agg=1, post=0):
    """Plain-Python TreeEnsemble: one sample and one tree at a time."""
    sets, runs = {}, list(a.get("membership_values", []))
    for i, m in enumerate(a["nodes_modes"]):
        if m == 6:
            cut = next(j for j, v in enumerate(runs) if math.isnan(v))
            sets[i], runs = set(runs[:cut]), runs[cut + 1 :]
    track = a.get("nodes_missing_value_tracks_true") or [0] * len(a["nodes_modes"])
    out = np.zeros((len(x), n_targets))
    for n, row in enumerate(x.astype(np.float64)):
        hits = {}
        for root in a["tree_roots"]:
            i, is_leaf = root, False
            while not is_leaf:
                v, m = row[a["nodes_featureids"][i]], a["nodes_modes"][i]
                s = float(np.asarray(a["nodes_splits"], x.dtype)[i])
                cond = (v in sets[i]) if m == 6 else COMPARE[m](v, s)
                cond = cond or (track[i] and math.isnan(v))
                key = "true" if cond else "false"
                i, is_leaf = a[f"nodes_{key}nodeids"][i], a[f"nodes_{key}leafs"][i]
            hits.setdefault(a["leaf_targetids"][i], []).append(float(a["leaf_weights"][i]))
        for t, ws in hits.items():
            out[n, t] = [sum(ws) / len(a["tree_roots"]), sum(ws), min(ws), max(ws)][agg]
    if post == 1:
        out = np.exp(out - out.max(1, keepdims=True))
        out /= out.sum(1, keepdims=True)
    elif post == 2:
        out = 1 / (1 + np.exp(-out))
    return (out.astype(x.dtype),)


SINGLE = dict(
    tree_roots=[0], nodes_modes=np.array([0, 0, 0], np.uint8), nodes_featureids=[0, 0, 0],
    nodes_splits=np.array([3.14, 1.2, 4.2]), nodes_truenodeids=[1, 0, 1],
    nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 2, 3], nodes_falseleafs=[0, 1, 1],
    leaf_targetids=[0, 1, 0, 1], leaf_weights=np.array([5.23, 12.12, -12.23, 7.21]),
)  # fmt: skip
MEMBER = dict(
    tree_roots=[0], nodes_modes=np.array([0, 6, 6], np.uint8), nodes_featureids=[0, 0, 0],
    nodes_splits=np.array([11, 232344.0, np.nan], np.float32), nodes_truenodeids=[1, 0, 1],
    nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 2, 3], nodes_falseleafs=[1, 0, 1],
    leaf_targetids=[0, 1, 2, 3], leaf_weights=np.array([1, 10, 1000, 100], np.float32),
    membership_values=np.array([1.2, 3.7, 8, 9, np.nan, 12, 7, np.nan], np.float32),
)  # fmt: skip


def random_forest(rng, n_trees, n_features, n_targets):
    """Random full trees of depth 1-3 with every mode but MEMBER, packed as ONNX attributes."""
    a = {k: [] for k in ("nodes_modes", "nodes_featureids", "nodes_splits", "nodes_truenodeids",
                         "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs",
                         "nodes_missing_value_tracks_true", "leaf_targetids", "leaf_weights",
                         "tree_roots")}  # fmt: skip

    def grow(depth):
        i = len(a["nodes_modes"])
        a["nodes_modes"].append(int(rng.integers(0, 6)))
        a["nodes_featureids"].append(int(rng.integers(0, n_features)))
        a["nodes_splits"].append(float(rng.integers(-2, 3)))
        a["nodes_missing_value_tracks_true"].append(int(rng.integers(0, 2)))
        for side in ("true", "false"):
            a[f"nodes_{side}nodeids"].append(-1)
            a[f"nodes_{side}leafs"].append(-1)
        for side in ("true", "false"):
            if depth == 0 or rng.random() < 0.3:
                a[f"nodes_{side}nodeids"][i] = len(a["leaf_weights"])
                a[f"nodes_{side}leafs"][i] = 1
                a["leaf_weights"].append(float(rng.normal()))
                a["leaf_targetids"].append(int(rng.integers(0, n_targets)))
            else:
                a[f"nodes_{side}nodeids"][i] = grow(depth - 1)
                a[f"nodes_{side}leafs"][i] = 0
        return i

    for _ in range(n_trees):
        a["tree_roots"].append(grow(int(rng.integers(1, 4))))
    a["nodes_modes"] = np.array(a["nodes_modes"], np.uint8)
    a["nodes_splits"] = np.array(a["nodes_splits"])
    a["leaf_weights"] = np.array(a["leaf_weights"])
    return a


def test_tree_ensemble_examples():
    x = np.array([1.2, 3.4, -0.12, 1.66, 4.14, 1.77]).reshape(3, 2)
    check_op("TreeEnsemble", [x], lambda x: walk_reference(x, SINGLE, 2), n_targets=2, **SINGLE)
    x = np.array([1.2, 3.4, -0.12, np.nan, 12, 7], np.float32).reshape(-1, 1)
    check_op("TreeEnsemble", [x], lambda x: walk_reference(x, MEMBER, 4), n_targets=4, **MEMBER)


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("post", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_random(agg, post, dtype):
    rng = np.random.default_rng(agg * 10 + post)
    a = random_forest(rng, n_trees=4, n_features=3, n_targets=3)
    x = rng.integers(-3, 4, size=(40, 3)).astype(dtype)
    x[rng.random(x.shape) < 0.1] = np.nan

    def reference(x):
        return walk_reference(x, a, 3, agg, post)

    check_op("TreeEnsemble", [x], reference, n_targets=3, aggregate_function=agg,
             post_transform=post, **a)  # fmt: skip


def test_tree_ensemble_probit_and_softmax_zero():
    attrs = dict(SINGLE, leaf_weights=np.array([0.2, 0.9, 0.5, 0.0]))
    x = np.array([[1.2, 0.0], [-0.12, 0.0], [4.14, 0.0], [3.5, 0.0]])
    raw = run_op("TreeEnsemble", [x], n_targets=2, **attrs)[0]
    (probit,) = run_op("TreeEnsemble", [x], n_targets=2, post_transform=4, **attrs)
    np.testing.assert_allclose(normal_cdf(probit[raw > 0]), raw[raw > 0], rtol=1e-12)
    (soft,) = run_op("TreeEnsemble", [x], n_targets=2, post_transform=3, **attrs)
    np.testing.assert_allclose(soft[raw != 0], 1.0)  # one nonzero score per row here
    assert (soft[raw == 0] == 0).all()


def test_tree_ensemble_errors():
    x = np.zeros((2, 2))
    with pytest.raises(OperatorError, match="nodes_featureids holds 5"):
        run_op("TreeEnsemble", [x], n_targets=2, **dict(SINGLE, nodes_featureids=[0, 5, 0]))
    with pytest.raises(OperatorError, match="lengths differ"):
        run_op("TreeEnsemble", [x], n_targets=2, **dict(SINGLE, nodes_featureids=[0, 0]))
    with pytest.raises(OperatorError, match="cycle"):
        loop = dict(SINGLE, nodes_truenodeids=[1, 0, 1], nodes_trueleafs=[0, 0, 1],
                    nodes_falsenodeids=[1, 0, 3], nodes_falseleafs=[0, 0, 1])  # fmt: skip
        run_op("TreeEnsemble", [x], n_targets=2, **loop)
    with pytest.raises(OperatorError, match="BRANCH_MEMBER"):
        run_op("TreeEnsemble", [x[:, :1]], n_targets=4, **dict(MEMBER, membership_values=[1.0]))
    with pytest.raises(OperatorError, match="post_transform=7"):
        run_op("TreeEnsemble", [x], n_targets=2, post_transform=7, **SINGLE)
