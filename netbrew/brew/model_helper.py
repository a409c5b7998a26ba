"""ModelHelper: a model's init net, its net, and its parameters, as in Caffe2."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from netbrew.brew.initializers import Initializer, add_given_fill
from netbrew.netdef.net import BlobReference, Net
from netbrew.netdef.scope import current_name_scope, name_scope


class Tags(str, enum.Enum):
    """What a parameter is: optimizers train WEIGHT and BIAS; COMPUTED ones (running stats)
    are updated by the forward pass and saved, never given gradients."""

    WEIGHT = "WEIGHT"
    BIAS = "BIAS"
    COMPUTED = "COMPUTED"


class ModelHelper:
    """Holds `param_init_net` (fills parameters), `net` (the model) and the parameters.

    As in Caffe2, the blobs a model owns are kept in three lists: `params`, the trainable
    parameters (WEIGHT, BIAS), each of which gets a gradient in `param_to_grad`;
    `computed_params`, updated by the forward pass and saved with the model (BatchNorm's
    running statistics); and `optimizer_state`, which the optimizers add (the iteration
    counter, momenta, Adam's moments) and a checkpoint saves to resume training.

    Args:
        name: the model name; the nets are `name` and `name_init`.
        arg_scope: default keyword arguments for every brew helper (e.g. {"order": ...}).
        seed: makes parameter initialization reproducible (the init net's random_seed).
        init_params: False builds a model that shares another's trained parameters (a test
            or deploy model, as Caffe2's flag did): its param_init_net fills no parameters,
            so running it leaves the trained weights in the workspace as they are.

    Example:
        >>> model = ModelHelper(name="mlp")
        >>> h = brew.fc(model, "data", "h", dim_in=4, dim_out=8)
        >>> model.get_params()
        ['h_w', 'h_b']
    """

    net_class: type[Net] = Net  # netbrew.caffe2's ModelHelper builds core.Nets

    def __init__(
        self,
        name: str = "model",
        arg_scope: dict[str, Any] | None = None,
        seed: int | None = None,
        *,
        init_params: bool = True,
    ) -> None:
        self.name = name
        self.init_params = init_params
        self.net = self.net_class(name)
        self.param_init_net = self.net_class(f"{name}_init")
        if seed is not None:
            self.param_init_net.proto().device_option.random_seed = seed
        self.arg_scope = dict(arg_scope or {})
        self.params: list[BlobReference] = []
        self.computed_params: list[BlobReference] = []
        self.optimizer_state: list[BlobReference] = []
        self.param_tags: dict[str, frozenset[Tags]] = {}
        self.param_shapes: dict[str, tuple[int, ...]] = {}
        self.param_to_grad: dict[str, str] = {}
        self.constants: list[str] = []

    def create_param(
        self,
        name: str,
        shape: Sequence[int],
        initializer: Initializer,
        tags: Tags | Iterable[Tags] = (),
    ) -> BlobReference:
        """Adds a parameter: its fill op goes into param_init_net (unless init_params is
        False), its blob into the net's external inputs. The only place parameters are made."""
        full = current_name_scope() + name
        if full in self.param_tags:
            raise ValueError(f"model {self.name!r} already has a parameter {full!r}")
        shape = tuple(int(d) for d in shape)
        if self.init_params:
            with name_scope("", reset=True):  # `full` is scoped already
                initializer.create(self.param_init_net, full, shape)
        return self.add_param(full, shape, tags)

    def add_param(
        self, name: str, shape: Sequence[int], tags: Tags | Iterable[Tags] = ()
    ) -> BlobReference:
        """Registers a blob the init net already fills as a parameter (Caffe2's AddParameter):
        COMPUTED ones go to computed_params, the others to params."""
        tag_set = frozenset([tags] if isinstance(tags, Tags) else tags)
        ref = self.net.add_external_input(BlobReference(name, self.net))[0]
        (self.computed_params if Tags.COMPUTED in tag_set else self.params).append(ref)
        self.param_tags[name] = tag_set
        self.param_shapes[name] = tuple(int(d) for d in shape)
        return ref

    def add_optimizer_state(
        self, name: str, shape: Sequence[int] | str, value: Any = 0.0
    ) -> BlobReference:
        """A blob an optimizer keeps between steps, filled with `value` by param_init_net
        (even when init_params is False: a model being trained owns its state). `shape`
        may name a blob param_init_net fills first: the state takes its shape when the
        init net runs (a parameter registered without one, as Caffe2's AddParameter)."""
        if name not in self.optimizer_state:
            dtype = None if isinstance(value, float) else np.asarray(value).dtype
            with name_scope("", reset=True):  # named after a parameter, scoped already
                if isinstance(shape, str):
                    like = BlobReference(shape, self.param_init_net)
                    self.param_init_net.ConstantFill([like], name, value=value, dtype=dtype)
                else:
                    self.param_init_net.ConstantFill(
                        [], name, shape=list(shape), value=value, dtype=dtype
                    )
            self.optimizer_state.append(
                self.net.add_external_input(BlobReference(name, self.net))[0]
            )
        return BlobReference(name, self.net)

    def add_constant(self, name: str, value: Any) -> BlobReference:
        """A fixed blob (not a parameter) filled once by param_init_net, e.g. Dropout's mode."""
        full = current_name_scope() + name
        if full not in self.constants:
            with name_scope("", reset=True):
                add_given_fill(self.param_init_net, full, np.asarray(value))
            self.constants.append(full)
        return self.net.add_external_input(BlobReference(full, self.net))[0]

    def get_params(self, tags: Tags | Iterable[Tags] | None = None) -> list[BlobReference]:
        """All parameters (trainable, then computed), optionally only those carrying one of
        `tags`; never the optimizer's state."""
        every = [*self.params, *self.computed_params]
        if tags is None:
            return every
        wanted = {tags} if isinstance(tags, Tags) else set(tags)
        return [p for p in every if self.param_tags[p] & wanted]

    def get_trainable_params(self) -> list[BlobReference]:
        """Parameters that get gradients: `params`."""
        return list(self.params)

    def run_all_on(self, device: Any) -> None:
        """Places the whole model, both nets and every op already added, on `device`
        ('cuda:0', 'cpu'), as Caffe2's RunAllOnGPU did; parameters are then made there."""
        from netbrew.netdef.scope import parse_device

        option = parse_device(device)
        for net in (self.net, self.param_init_net):
            net.set_device(option)
            for op in net.proto().op:
                op.device_option.CopyFrom(option)

    def get_computed_params(self) -> list[BlobReference]:
        return list(self.computed_params)

    def get_checkpoint_blobs(self) -> list[BlobReference]:
        """What a checkpoint saves to resume training: the parameters, computed or not, and
        the optimizer's state."""
        return [*self.get_params(), *self.optimizer_state]

    def add_gradient_operators(self, losses: Sequence[str]) -> dict[str, str]:
        """Appends the backward pass for `losses`; returns blob -> gradient blob."""
        from netbrew.netdef.autodiff import add_gradient_ops

        grads = add_gradient_ops(self.net, list(losses), wrt=self.get_trainable_params())
        self.param_to_grad = {p: grads[p] for p in self.get_trainable_params() if p in grads}
        return grads

    def __getattr__(self, op_type: str):
        """`model.Relu(...)` adds the op to model.net, as in Caffe2."""
        if op_type.startswith("_"):
            raise AttributeError(op_type)
        return getattr(self.net, op_type)

    def __repr__(self) -> str:
        count = len(self.params) + len(self.computed_params)
        return f"ModelHelper({self.name!r}, {count} params, {len(self.net.ops)} ops)"
