"""Optimizers, added to a model as ops (Caffe2's optimizer.build_sgd / build_adam).

Each appends to `model.net`: an `Iter` on the iteration counter, a `LearningRate`, and
one update op per trainable parameter, after the gradient ops. The state (counter,
momenta, moments) is filled by `param_init_net` and listed in `model.optimizer_state`,
apart from the parameters, as Caffe2 kept it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from netbrew.brew.model_helper import ModelHelper
from netbrew.brew.train import add_weight_decay
from netbrew.netdef.net import BlobReference
from netbrew.netdef.scope import canonical_scope, current_name_scope

ITER = "optimizer_iteration"


def _iteration_and_lr(
    model: ModelHelper, base_learning_rate: float, policy: str, lr_args: dict[str, Any]
) -> tuple[BlobReference, BlobReference]:
    if not model.param_to_grad:
        raise ValueError(
            f"model {model.name!r} has no gradients: call add_gradient_operators(losses) first"
        )
    # one counter per name scope (Caffe2's ScopedName): a model built under "gpu_0/"
    # counts in "gpu_0/optimizer_iteration"
    it = model.add_optimizer_state(current_name_scope() + ITER, [1], np.int64(0))
    counter = model.net.Iter(it, it)
    lr = model.net.LearningRate(counter, "lr", base_lr=base_learning_rate, policy=policy, **lr_args)
    return counter, lr


def _state(model: ModelHelper, param: str, suffix: str) -> BlobReference:
    """A zero-filled optimizer state blob shaped like `param` (at run time where the
    model knows no shape for it)."""
    shape = model.param_shapes.get(param)
    return model.add_optimizer_state(f"{param}_{suffix}", shape if shape else param)


def _updates(model: ModelHelper) -> list[tuple[BlobReference, BlobReference]]:
    """(param, grad) pairs as references: their names are scoped already, and a plain
    string would take the current name scope a second time."""
    return [(BlobReference(p, model.net), BlobReference(g, model.net))
            for p, g in model.param_to_grad.items()]  # fmt: skip


def _canonical(fn):
    """Runs an optimizer builder in canonical_scope (its ops are netbrew's own spellings)."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with canonical_scope():
            return fn(*args, **kwargs)

    return wrapped


@_canonical
def build_sgd(
    model: ModelHelper,
    base_learning_rate: float,
    *,
    policy: str = "fixed",
    momentum: float = 0.0,
    nesterov: bool = True,
    weight_decay: float = 0.0,
    **lr_args: Any,
) -> BlobReference:
    """Stochastic gradient descent, with optional (Nesterov) momentum and weight decay.

    Args:
        base_learning_rate: the step size at iteration 0 (positive).
        policy: LearningRate policy: "fixed", "step" (gamma, stepsize), "exp" (gamma)
            or "inv" (gamma, power); their arguments go in **lr_args.
        momentum: 0 for plain SGD.
        nesterov: Nesterov's momentum, the default of Caffe2's build_sgd (the
            MomentumSGDUpdate op itself defaults to plain momentum, as Caffe2's did).
        weight_decay: L2 penalty on WEIGHT parameters.

    Returns:
        The learning-rate blob.
    Emits: Iter, LearningRate, then WeightedSum (plain) or MomentumSGDUpdate per parameter.
    """
    if weight_decay:
        add_weight_decay(model, weight_decay)
    sign = 1.0 if momentum > 0 else -1.0  # Caffe2's conventions for the two update ops
    _, lr = _iteration_and_lr(model, sign * base_learning_rate, policy, lr_args)
    one = model.add_constant("ONE", np.ones(1, np.float32))
    for param, grad in _updates(model):
        if momentum > 0:
            m = _state(model, param, "momentum")
            model.net.MomentumSGDUpdate(
                [grad, m, lr, param], [grad, m, param], momentum=momentum, nesterov=int(nesterov)
            )
        else:
            model.net.WeightedSum([param, one, grad, lr], param)
    return lr


@_canonical
def build_adam(
    model: ModelHelper,
    base_learning_rate: float,
    *,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    policy: str = "fixed",
    weight_decay: float = 0.0,
    **lr_args: Any,
) -> BlobReference:
    """Adam with bias correction (Caffe2's Adam op). Returns the learning-rate blob.

    Emits: Iter, LearningRate, then Adam per parameter, with zero-filled moments
    `{param}_first_moment` and `{param}_second_moment`.
    """
    if weight_decay:
        add_weight_decay(model, weight_decay)
    counter, lr = _iteration_and_lr(model, -base_learning_rate, policy, lr_args)
    for param, grad in _updates(model):
        m1, m2 = _state(model, param, "first_moment"), _state(model, param, "second_moment")
        model.net.Adam(
            [param, m1, m2, grad, lr, counter],
            [param, m1, m2],
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
        )
    return lr
