"""caffe2.python.optimizer on netbrew: build_sgd and build_adam return an optimizer object
that knows its blobs, as Caffe2's did."""

from __future__ import annotations

from typing import Any

from netbrew.brew import optimizer as _optimizer


class Optimizer:
    """What a build_* call added: the learning-rate blob and the state blobs."""

    def __init__(self, model: Any, lr: str, state: list[str]) -> None:
        self.model, self.lr, self.state = model, lr, state

    def get_cpu_blob_name(self, base_str: str, node_name: str = "") -> str:
        return base_str + ("_" + node_name if node_name else "") + "_cpu"

    def get_gpu_blob_name(self, base_str: str, gpu_id: int = 0, node_name: str = "") -> str:
        return base_str + ("_" + node_name if node_name else "") + f"_gpu{gpu_id}"

    def get_auxiliary_parameters(self) -> list[str]:
        return list(self.state)


def _build(fn, model: Any, base_learning_rate: float, **kwargs: Any) -> Optimizer:
    before = set(model.optimizer_state)
    lr = fn(model, base_learning_rate, **kwargs)
    return Optimizer(model, lr, [b for b in model.optimizer_state if b not in before])


def build_sgd(model: Any, base_learning_rate: float, max_gradient_norm: Any = None,
              allow_lr_injection: bool = False, **kwargs: Any) -> Optimizer:  # fmt: skip
    """SGD as Caffe2 built it: momentum (default 0) is Nesterov's unless nesterov=0."""
    _unsupported("build_sgd", max_gradient_norm=max_gradient_norm,
                 allow_lr_injection=allow_lr_injection)  # fmt: skip
    kwargs["nesterov"] = bool(kwargs.get("nesterov", True))
    return _build(_optimizer.build_sgd, model, base_learning_rate, **kwargs)


def build_adam(model: Any, base_learning_rate: float, max_gradient_norm: Any = None,
               allow_lr_injection: bool = False, **kwargs: Any) -> Optimizer:  # fmt: skip
    _unsupported("build_adam", max_gradient_norm=max_gradient_norm,
                 allow_lr_injection=allow_lr_injection)  # fmt: skip
    return _build(_optimizer.build_adam, model, base_learning_rate, **kwargs)


def build_multi_precision_sgd(model: Any, base_learning_rate: float, **kwargs: Any) -> Optimizer:
    """Caffe2 kept fp32 master weights beside fp16 ones on GPUs; netbrew trains in the
    parameters' own dtype on the CPU, so this is build_sgd."""
    return build_sgd(model, base_learning_rate, **kwargs)


def _unsupported(where: str, **options: Any) -> None:
    given = [k for k, v in options.items() if v not in (None, False)]
    if given:
        raise NotImplementedError(f"optimizer.{where}: {', '.join(given)} is not supported")


def add_weight_decay(model: Any, weight_decay: float) -> None:
    """grad += weight_decay * param for the WEIGHT parameters, as Caffe2's (weights_only)."""
    from netbrew.brew.train import add_weight_decay as add

    add(model, weight_decay)


_CAFFE2_ONLY = frozenset(
    "build_adagrad build_rms_prop build_ftrl build_gftrl build_adadelta build_wngrad "
    "build_yellowfin build_storm build_decay_adagrad".split()
)


def __getattr__(name: str) -> Any:
    """Caffe2's other builders: named, with what netbrew has instead of a bare error."""
    if name in _CAFFE2_ONLY:
        raise AttributeError(
            f"optimizer.{name} is not available in netbrew; it builds build_sgd (momentum, "
            "Nesterov, weight decay), build_adam and build_multi_precision_sgd"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
