"""TreeEnsemble (ai.onnx.ml opset 5): the sums of decision-tree leaves, per target.

Trees are walked for all samples and trees at once, one level per step. Interior node i
compares X[:, nodes_featureids[i]] with nodes_splits[i] by nodes_modes[i] (0 LEQ, 1 LT,
2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER of its NaN-delimited run of membership_values); a NaN
feature takes the true branch where nodes_missing_value_tracks_true[i] is 1 and otherwise
the comparison's result (False, except NEQ). Splits and members are compared in X's dtype;
leaves are aggregated in float64 and the result cast to X's dtype. With MIN or MAX, a
target that no leaf reaches is 0 (as in onnxruntime). nodes_hitrates is ignored.
"""

from __future__ import annotations

import math

import numpy as np

from netbrew.errors import SchemaError, ShapeError
from netbrew.operators.activations import normal_cdf
from netbrew.operators.schema import REQUIRED, kernel, no_gradient, schema

_NODE_ATTRS = ("nodes_featureids", "nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids",
               "nodes_falseleafs")  # fmt: skip

schema(
    "TreeEnsemble",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        "aggregate_function": 1,
        "post_transform": 0,
        "n_targets": None,
        "tree_roots": REQUIRED,
        "nodes_modes": REQUIRED,
        "nodes_splits": REQUIRED,
        **{name: REQUIRED for name in _NODE_ATTRS},
        "nodes_missing_value_tracks_true": None,
        "nodes_hitrates": None,
        "membership_values": None,
        "leaf_targetids": REQUIRED,
        "leaf_weights": REQUIRED,
    },
    dtypes={0: "float"},
    doc="Y[n, t] = aggregate (0 AVERAGE, 1 SUM default, 2 MIN, 3 MAX) of the weights of the "
    "leaves for target t that sample X[n] reaches, one per tree, then post_transform (0 NONE "
    "default, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT); X [N, F], Y [N, n_targets] "
    "in X's dtype",
)


def _inverse_normal_cdf(p: np.ndarray) -> np.ndarray:
    """Phi^-1(p) = sqrt(2) erfinv(2p - 1): Acklam's approximation and one Halley step."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)  # fmt: skip
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)  # fmt: skip
    p = np.asarray(p, np.float64)
    with np.errstate(all="ignore"):
        tail = np.minimum(p, 1 - p)
        q = np.sqrt(-2 * np.log(np.where(tail > 0, tail, 1.0)))
        x_tail = np.polyval(c, q) / np.polyval(d + (1.0,), q)
        x_tail = np.where(p < 0.5, x_tail, -x_tail)
        r = (p - 0.5) ** 2
        x_mid = (p - 0.5) * np.polyval(a, r) / np.polyval(b + (1.0,), r)
        x = np.where(tail < 0.02425, x_tail, x_mid)
        e = normal_cdf(x) - p
        u = e * math.sqrt(2 * math.pi) * np.exp(x * x / 2)
        x = x - u / (1 + x * u / 2)
    x = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, x))
    return np.where((p < 0) | (p > 1) | np.isnan(p), np.nan, x)


def _post(y: np.ndarray, how: int) -> np.ndarray:
    if how == 0:
        return y
    if how == 2:
        return 1 / (1 + np.exp(-y))
    if how == 4:
        return _inverse_normal_cdf(y)
    if how in (1, 3):
        keep = np.ones_like(y, bool) if how == 1 else y != 0
        e = np.where(keep, np.exp(y - np.max(np.where(keep, y, -np.inf), 1, keepdims=True)), 0)
        total = e.sum(axis=1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    raise SchemaError(f"TreeEnsemble: post_transform={how}, expected 0 to 4")


def _ints(attrs: dict, name: str) -> np.ndarray:
    return np.asarray(attrs[name], dtype=np.int64).reshape(-1)


@kernel("TreeEnsemble")
def tree_ensemble_cpu(x, **attrs):
    op = "TreeEnsemble"
    if x.ndim not in (1, 2):
        raise ShapeError(f"{op}: input 'X' has shape {list(x.shape)}, expected [N, F]")
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    n_samples, n_features = x2.shape
    modes = np.asarray(attrs["nodes_modes"]).reshape(-1).astype(np.int64)
    splits = np.asarray(attrs["nodes_splits"]).reshape(-1).astype(x.dtype)
    feat, true_id, true_leaf, false_id, false_leaf = (_ints(attrs, n) for n in _NODE_ATTRS)
    n_nodes = modes.size
    track = np.zeros(n_nodes, bool)
    if attrs["nodes_missing_value_tracks_true"] is not None:
        track = _ints(attrs, "nodes_missing_value_tracks_true") != 0
    roots = _ints(attrs, "tree_roots")
    targets = _ints(attrs, "leaf_targetids")
    weights = np.asarray(attrs["leaf_weights"]).reshape(-1).astype(np.float64)
    n_targets = attrs["n_targets"]
    n_targets = int(targets.max(initial=-1)) + 1 if n_targets is None else int(n_targets)
    sizes = {
        "nodes_modes": n_nodes,
        "nodes_splits": splits.size,
        "nodes_missing_value_tracks_true": track.size,
    }
    sizes.update(
        {n: v.size for n, v in zip(_NODE_ATTRS, (feat, true_id, true_leaf, false_id, false_leaf))}
    )
    if len(set(sizes.values())) != 1 or targets.size != weights.size:
        raise SchemaError(
            f"{op}: nodes_* lengths differ {sizes} or leaf_targetids ({targets.size}) "
            f"and leaf_weights ({weights.size}) differ"
        )
    checks = [("tree_roots", roots, n_nodes), ("nodes_featureids", feat, n_features),
              ("leaf_targetids", targets, n_targets)]  # fmt: skip
    for ids, leafs, name in (
        (true_id, true_leaf, "nodes_truenodeids"),
        (false_id, false_leaf, "nodes_falsenodeids"),
    ):
        checks += [(name, ids[leafs != 0], targets.size), (name, ids[leafs == 0], n_nodes)]
    for name, ids, bound in checks:
        if ids.size and (ids.min() < 0 or ids.max() >= bound):
            raise SchemaError(
                f"{op}: {name} holds {ids[(ids < 0) | (ids >= bound)][0]}, "
                f"out of range [0, {bound})"
            )
    if ((modes < 0) | (modes > 6)).any():
        raise SchemaError(f"{op}: nodes_modes must be 0 to 6, got {sorted(set(modes.tolist()))}")

    members = {}  # member node -> its set of values
    if (modes == 6).any():
        runs = attrs["membership_values"]
        runs = [] if runs is None else np.asarray(runs).reshape(-1).astype(x.dtype)
        cuts = np.flatnonzero(np.isnan(runs))
        member_nodes = np.flatnonzero(modes == 6)
        if len(cuts) != len(member_nodes):
            raise SchemaError(
                f"{op}: {len(member_nodes)} BRANCH_MEMBER nodes but membership_values "
                f"holds {len(cuts)} NaN-terminated sets"
            )
        starts = np.concatenate([[0], cuts[:-1] + 1])
        members = {int(nd): runs[s:e] for nd, s, e in zip(member_nodes, starts, cuts)}

    node = np.broadcast_to(roots, (n_samples, roots.size)).copy()
    leaf = np.zeros_like(node)
    active = np.ones(node.shape, bool)
    for _ in range(n_nodes + 1):
        if not active.any():
            break
        r, t = np.nonzero(active)
        nd = node[r, t]
        v, s, m = x2[r, feat[nd]], splits[nd], modes[nd]
        cond = np.select(
            [m == 0, m == 1, m == 2, m == 3, m == 4, m == 5],
            [v <= s, v < s, v >= s, v > s, v == s, v != s],
            False,
        )
        for member, values in members.items():
            at = nd == member
            cond[at] = np.isin(v[at], values)
        cond |= track[nd] & np.isnan(v)
        nxt = np.where(cond, true_id[nd], false_id[nd])
        done = np.where(cond, true_leaf[nd], false_leaf[nd]) != 0
        leaf[r[done], t[done]] = nxt[done]
        node[r[~done], t[~done]] = nxt[~done]
        active[r[done], t[done]] = False
    else:
        if active.any():
            raise SchemaError(f"{op}: the trees have a cycle (a walk passed {n_nodes} nodes)")

    agg = attrs["aggregate_function"]
    rows = np.broadcast_to(np.arange(n_samples)[:, None], leaf.shape).reshape(-1)
    tid, w = targets[leaf].reshape(-1), weights[leaf].reshape(-1)
    if agg in (0, 1):
        y = np.zeros((n_samples, n_targets))
        np.add.at(y, (rows, tid), w)
        y = y / roots.size if agg == 0 and roots.size else y
    elif agg in (2, 3):
        y = np.full((n_samples, n_targets), np.inf if agg == 2 else -np.inf)
        (np.minimum if agg == 2 else np.maximum).at(y, (rows, tid), w)
        reached = np.zeros(y.shape, bool)
        reached[rows, tid] = True
        y[~reached] = 0.0
    else:
        raise SchemaError(f"{op}: aggregate_function={agg}, expected 0 (AVERAGE) to 3 (MAX)")
    return (_post(y, attrs["post_transform"]).astype(x.dtype),)


no_gradient("TreeEnsemble", "piecewise-constant in X (zero gradient almost everywhere)")
