"""ModelHelper: a model's init net, its net, and its parameters, as in Caffe2."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from netbrew.brew.initializers import Initializer, add_given_fill
from netbrew.netdef.net import BlobReference, Net
from netbrew.netdef.scope import current_name_scope


class Tags(str, enum.Enum):
    """What a parameter is: optimizers train WEIGHT and BIAS; COMPUTED ones (running stats)
    are updated by the forward pass and saved, never given gradients."""

    WEIGHT = "WEIGHT"
    BIAS = "BIAS"
    COMPUTED = "COMPUTED"


class ModelHelper:
    """Holds `param_init_net` (fills parameters), `net` (the model) and the parameters.

    Args:
        name: the model name; the nets are `name` and `name_init`.
        arg_scope: default keyword arguments for every brew helper (e.g. {"order": ...}).
        seed: makes parameter initialization reproducible (the init net's random_seed).

    Example:
        >>> model = ModelHelper(name="mlp")
        >>> h = brew.fc(model, "data", "h", dim_in=4, dim_out=8)
        >>> model.get_params()
        ['h_w', 'h_b']
    """

    def __init__(
        self, name: str = "model", arg_scope: dict[str, Any] | None = None, seed: int | None = None
    ) -> None:
        self.name = name
        self.net = Net(name)
        self.param_init_net = Net(f"{name}_init")
        if seed is not None:
            self.param_init_net.proto().device_option.random_seed = seed
        self.arg_scope = dict(arg_scope or {})
        self.params: list[BlobReference] = []
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
        """Adds a parameter: its fill op goes into param_init_net, its blob into the net's
        external inputs. The only place parameters are made."""
        full = current_name_scope() + name
        if full in self.param_tags:
            raise ValueError(f"model {self.name!r} already has a parameter {full!r}")
        shape = tuple(int(d) for d in shape)
        initializer.create(self.param_init_net, full, shape)
        tag_set = frozenset([tags] if isinstance(tags, Tags) else tags)
        ref = self.net.add_external_input(BlobReference(full, self.net))[0]
        self.params.append(ref)
        self.param_tags[full] = tag_set
        self.param_shapes[full] = shape
        return ref

    def add_constant(self, name: str, value: Any) -> BlobReference:
        """A fixed blob (not a parameter) filled once by param_init_net, e.g. Dropout's mode."""
        full = current_name_scope() + name
        if full not in self.constants:
            add_given_fill(self.param_init_net, full, np.asarray(value))
            self.constants.append(full)
        return self.net.add_external_input(BlobReference(full, self.net))[0]

    def get_params(self, tags: Tags | Iterable[Tags] | None = None) -> list[BlobReference]:
        """Parameters, optionally only those carrying one of `tags`."""
        if tags is None:
            return list(self.params)
        wanted = {tags} if isinstance(tags, Tags) else set(tags)
        return [p for p in self.params if self.param_tags[p] & wanted]

    def get_trainable_params(self) -> list[BlobReference]:
        """Parameters that get gradients: all but the COMPUTED ones."""
        return [p for p in self.params if Tags.COMPUTED not in self.param_tags[p]]

    def get_computed_params(self) -> list[BlobReference]:
        return self.get_params(Tags.COMPUTED)

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
        return f"ModelHelper({self.name!r}, {len(self.params)} params, {len(self.net.ops)} ops)"
