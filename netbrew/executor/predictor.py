"""Predictor: the inference entry point over an (init_net, predict_net) pair."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netbrew.errors import BlobNotFoundError, FeedError, OperatorError, SchemaError
from netbrew.executor.profiler import Profile
from netbrew.executor.workspace import Workspace, _netdef
from netbrew.netdef.args import overridable
from netbrew.netdef.tensor import dtype_of
from netbrew.proto.netbrew_pb2 import NetDef, TensorShape

FILE_OPS = frozenset({"Save", "Load"})


def _host(value: Any) -> Any:
    """A GPU output copied back to NumPy (the caller gets host arrays either way)."""
    return value.get() if hasattr(value, "gpudata") else value


def _reads(net: NetDef) -> set[str]:
    """Every blob an op of `net` reads, its subgraphs' outer reads included."""
    from netbrew.netdef.passes._graph import reads

    return {b for op in net.op for b in reads(op)}


def array_roots(values: Any) -> set[int]:
    """The ids of the arrays that own the memory of `values` (see `detached`)."""
    return {id(_root(v)) for v in values if isinstance(v, np.ndarray)}


def detached(value: Any, roots: set[int]) -> Any:
    """`value`, copied when it is (a view of) one of the arrays `roots` names: an output
    that is a parameter (Identity of a weight, a constant output) must not let the
    caller's writes reach the model."""
    if isinstance(value, np.ndarray) and id(_root(value)) in roots:
        return value.copy()
    return value


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def refuse_file_ops(net: NetDef, who: str) -> None:
    """Raises SchemaError if `net` holds ops that touch the file system (DESIGN §9)."""
    found = sorted({op.type for op in net.op if op.type in FILE_OPS})
    if found:
        raise SchemaError(
            f"{who}: net {net.name!r} contains {', '.join(found)}, which reads or writes "
            "files; a loaded model may not do that unless you pass allow_file_ops=True"
        )


def optimize_for_inference(
    net: NetDef, workspace: Workspace, *, params_are_constant: bool = False, device: str = "cpu"
) -> NetDef:
    """The inference-safe passes for a net whose parameters are in `workspace`:
    BatchNormalization folding, Relu fusion and Winograd convs (which rewrite or add
    parameters in the workspace) and channel-shuffle folding, then constant folding, CSE
    and dead-code elimination, then elementwise fusion and blob sharing (intermediates
    renamed; inputs, outputs, workspace blobs kept).

    Args:
        params_are_constant: fold ops on the workspace's blobs too. Off by default, since
            a blob a Caffe2 init net fills may still be fed (a "data" placeholder); ONNX
            initializers are constants.
    """
    from netbrew.netdef.passes import fuse_elementwise, rewrite_for_inference, share_blobs
    from netbrew.netdef.passes import optimize as run_passes

    if not net.external_output and net.op:  # the outputs dead-code elimination keeps
        copy = NetDef()
        copy.CopyFrom(net)
        copy.external_output.extend(o for o in net.op[-1].output if o)
        net = copy
    fed = overridable(net)  # ONNX initializers a feed may replace: never constants
    if params_are_constant:
        net = _precompute(net, workspace, fed)
    params = {b: workspace.fetch_blob(b) for b in workspace.blobs() if b not in fed}
    net, new_params = rewrite_for_inference(net, params, device)
    for name, value in new_params.items():
        if params.get(name) is not value:  # only the rewritten or added weights
            workspace.feed_blob(name, value)
    net = fuse_elementwise(run_passes(net, level=1))
    return share_blobs(net, keep=workspace.blobs())


def _precompute(net: NetDef, workspace: Workspace, fed: set[str]) -> NetDef:
    """Runs, once, the ops that read only workspace blobs (constants, less the `fed`
    ones), keeping their results in the workspace rather than in the net, and drops them
    from the net."""
    from netbrew.operators import get_schema

    constant = set(workspace.blobs()) - fed
    written: set[str] = set()
    kept = []
    for op in net.op:
        schema = get_schema(op.type)
        pure = not (schema.rng or schema.wants_scope or schema.wants_names) and op.output
        inputs = [i for i in op.input if i]
        if pure and all(i in constant for i in inputs) and not written & set(op.output):
            workspace.run_operator_once(op)
            constant.update(op.output)
        else:
            kept.append(op)
            written.update(op.output)
            constant.difference_update(op.output)
    out = NetDef()
    out.CopyFrom(net)
    del out.op[:]
    out.op.extend(kept)
    return out


class Predictor:
    """Runs `init_net` once, then `run(feeds)` runs `predict_net` and returns its outputs.

    Args:
        init_net: the net that fills parameters (Net, NetDef, or None).
        predict_net: the inference net.
        allow_file_ops: permit Save/Load ops in either net.
        optimize: apply the inference-safe graph passes (netbrew.netdef.passes) first.
        device: "cpu", or "cuda"/"cuda:N": the parameters move to that GPU once, and the
            placement pass (netbrew.executor.placement) puts every op with a CUDA kernel
            there, with explicit copies; outputs come back as NumPy arrays. DeviceError
            when CUDA cannot be had.
        strict: with a GPU device, refuse ops without a CUDA kernel instead of running
            them on the CPU.

    Feeds are checked: a missing or unexpected input, or one whose dtype or rank differs
    from the net's value_info, raises FeedError naming the blob.
    """

    def __init__(
        self,
        init_net: Any,
        predict_net: Any,
        *,
        allow_file_ops: bool = False,
        optimize: bool = True,
        device: str = "cpu",
        strict: bool = False,
    ) -> None:
        self.device = "cpu" if device in (None, "cpu") else device
        if self.device != "cpu":
            from netbrew.cuda import require

            self.device = f"cuda:{require(self.device)}"  # DeviceError says what is missing
        self.predict_net = _netdef(predict_net)
        init = _netdef(init_net) if init_net is not None else NetDef(name="init")
        if not allow_file_ops:
            refuse_file_ops(init, "Predictor")
            refuse_file_ops(self.predict_net, "Predictor")
        self.workspace = Workspace()
        self.workspace.run_net_once(init)
        read_before = _reads(self.predict_net)
        self.optimized = optimize
        if optimize:
            self.predict_net = optimize_for_inference(
                self.predict_net, self.workspace, device=self.device
            )
        params = set(self.workspace.blobs())
        # blobs the init net fills that the passes folded away as constants: a feed for
        # one (a Caffe2 placeholder for "data") would be ignored, so it is refused
        self._folded = (read_before & params) - _reads(self.predict_net)
        self.input_names = [b for b in self.predict_net.external_input if b not in params]
        self.external_inputs = set(self.predict_net.external_input)
        self.output_names = list(self.predict_net.external_output) or (
            list(self.predict_net.op[-1].output) if self.predict_net.op else []
        )
        self.value_info: dict[str, TensorShape] = {v.name: v for v in self.predict_net.value_info}
        self.placement = None
        if self.device != "cpu":
            self._place(strict)
        self.workspace.create_net(self.predict_net)
        self._runtime = self.workspace.get_net(self.predict_net.name)
        self._params = {
            n: self.workspace.fetch_blob(n, copy_to_host=False) for n in self.workspace.blobs()
        }
        self._param_roots = array_roots(self._params.values())

    def _place(self, strict: bool) -> None:
        """Parameters to the GPU, ops placed with copies (self.placement is the report)."""
        from netbrew.executor.placement import plan_placement

        params = [b for b in self.workspace.blobs() if b not in self.input_names]
        for name in params:
            self.workspace.feed_blob(name, self.workspace.fetch_blob(name), device=self.device)
        self.placement = plan_placement(
            self.predict_net, device=self.device, params=params, params_device=self.device,
            strict=strict,
        )  # fmt: skip
        self.predict_net = self.placement.net

    def check_feeds(self, feeds: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """The feeds as arrays, after checking names, dtypes and ranks. A list or tuple
        gives the inputs in the order of `input_names`, as Caffe2's Predictor took them."""
        if isinstance(feeds, (list, tuple)):
            if len(feeds) != len(self.input_names):
                raise FeedError(
                    f"got {len(feeds)} input array(s) in a list, expected "
                    f"{len(self.input_names)}: {', '.join(self.input_names) or 'none'}"
                )
            feeds = dict(zip(self.input_names, feeds))
        elif not isinstance(feeds, Mapping):
            raise FeedError(
                f"feeds must be a dict {{input name: array}} or a list of arrays in the "
                f"order {self.input_names}, got {type(feeds).__name__}"
            )
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            strays = [n for n in feeds if n not in self.external_inputs]
            fed = f" (fed instead: {', '.join(map(repr, strays))})" if strays else ""
            raise FeedError(
                f"missing input {missing[0]!r}{self._expected(missing[0])}{fed}; "
                f"the net's inputs are: {', '.join(self.input_names)}"
            )
        folded = [n for n in feeds if n in self._folded]
        if folded:
            raise FeedError(
                f"input {folded[0]!r} is filled by the init net, and the inference passes "
                "folded it into constants, so a fed value would be ignored; create the "
                "Predictor with optimize=False to feed it, or leave it out of the init net"
            )
        # a blob the init net fills may still be fed (Caffe2 init nets often create a
        # placeholder for "data"); anything outside the net's external inputs may not
        unexpected = [n for n in feeds if n not in self.external_inputs]
        if unexpected:
            raise FeedError(
                f"unexpected input {unexpected[0]!r}; the net's inputs are: "
                f"{', '.join(self.input_names) or 'none'}"
            )
        arrays = {}
        for name, value in feeds.items():
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
            info = self.value_info.get(name)
            if info is not None and not info.unknown_shape:
                want = dtype_of(info.data_type)
                if array.dtype != want:
                    raise FeedError(f"input {name!r} has dtype {array.dtype}, expected {want}")
                if array.ndim != len(info.dims):
                    raise FeedError(
                        f"input {name!r} has {array.ndim} dims {list(array.shape)}, "
                        f"expected {len(info.dims)}{self._expected(name)}"
                    )
            arrays[name] = array
        return arrays

    def _expected(self, name: str) -> str:
        info = self.value_info.get(name)
        if info is None or info.unknown_shape:
            return ""
        dims = [
            (info.dim_names[i] if i < len(info.dim_names) and info.dim_names[i] else "?")
            if i in info.unknown_dims
            else str(d)
            for i, d in enumerate(info.dims)
        ]
        return f" (expected {dtype_of(info.data_type)}[{', '.join(dims)}])"

    def run(self, feeds: Mapping[str, Any] | Sequence[Any]) -> dict[str, np.ndarray]:
        """Runs the net on `feeds` (input name -> array, or a list of arrays in the order
        of `input_names`); returns output name -> array.

        Thread-safe: each call runs on its own blob dict, a shallow copy of the parameters
        the init net made, so calls from several threads neither see nor overwrite each
        other's feeds and activations, and the shared workspace is never written.
        """
        return self._run(self.check_feeds(feeds))

    def profile(self, feeds: Mapping[str, Any], num_iter: int = 10, warmup: int = 1) -> Profile:
        """Runs the net on `feeds` `warmup` times untimed, then `num_iter` times with every op
        timed; returns the Profile (`table()` per op type, `op_table()` per op,
        `save_trace(path)` for a Chrome trace). Prints nothing.

        Raises:
            ValueError: num_iter < 1 or warmup < 0.
        """
        if num_iter < 1 or warmup < 0:
            raise ValueError(
                f"profile needs num_iter >= 1 and warmup >= 0, got {num_iter} and {warmup}"
            )
        arrays = self.check_feeds(feeds)
        for _ in range(warmup):
            self._run(arrays)
        result = Profile()
        for _ in range(num_iter):
            self._run(arrays, result)
            result.iterations += 1
        return result

    def _run(self, arrays: dict[str, np.ndarray], profile: Profile | None = None) -> dict:
        blobs = dict(self._params)
        blobs.update(arrays)
        try:
            self._runtime.run(blobs, profile=profile)
        except OperatorError as e:
            if not self.optimized:
                raise
            raise OperatorError(
                f"{e}\n(an op of the net after the inference passes, which fuse and rename "
                "ops: Predictor(..., optimize=False) runs and names the ops as written)"
            ) from e
        missing = [n for n in self.output_names if n not in blobs]
        if missing:
            raise BlobNotFoundError(
                f"output {missing[0]!r} was not produced by net {self.predict_net.name!r}"
            )
        return {name: detached(_host(blobs[name]), self._param_roots) for name in self.output_names}
