"""The Workspace: a blob store plus the nets created in it, as in Caffe2."""

from __future__ import annotations

from typing import Any

import numpy as np

from netbrew.errors import BlobNotFoundError, SchemaError, suggest
from netbrew.executor.compiled import compile_op
from netbrew.executor.profiler import Profile
from netbrew.executor.runtime import create_runtime
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef


def _netdef(net: Any) -> NetDef:
    return net.proto() if hasattr(net, "proto") else net


class Workspace:
    """Named blobs (name -> ndarray or other object) and created nets.

    Example:
        >>> ws = Workspace()
        >>> ws.feed_blob("x", np.array([-1.0, 2.0], dtype=np.float32))
        >>> ws.run_operator_once(op_def("Relu", ["x"], ["y"]))
        >>> ws.fetch_blob("y")
        array([0., 2.], dtype=float32)
    """

    def __init__(self) -> None:
        self._blobs: dict[str, Any] = {}
        self._nets: dict[str, Any] = {}

    # -- blobs ---------------------------------------------------------------------------

    def feed_blob(self, name: str, value: Any, device: str | None = None) -> None:
        """Stores `value` (anything np.asarray accepts) under `name`; device="cuda:0" keeps
        it on that GPU as a PyCUDA GPUArray (DeviceError when CUDA cannot be had)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"blob name must be a non-empty string, got {name!r}")
        if device is not None and device != "cpu":
            from netbrew.cuda import to_gpu

            self._blobs[name] = to_gpu(value, device)
            return
        gpu = hasattr(value, "gpudata")
        self._blobs[name] = value if isinstance(value, np.ndarray) or gpu else np.asarray(value)

    def blob_device(self, name: str) -> str:
        """'cuda' for a blob held on a GPU, 'cpu' otherwise."""
        return "cuda" if hasattr(self.fetch_blob(name, copy_to_host=False), "gpudata") else "cpu"

    def fetch_blob(self, name: str, copy_to_host: bool = True) -> Any:
        """The blob called `name` (a GPU blob copied back to NumPy, as Caffe2's FetchBlob
        did, unless copy_to_host=False); the error suggests near names, scoped ones too."""
        try:
            value = self._blobs[name]
            return value.get() if copy_to_host and hasattr(value, "gpudata") else value
        except KeyError:
            near = suggest(name, self._blobs)
            scoped = [b for b in self._blobs if b.endswith("/" + name)]
            if scoped and not near:
                near = f" Did you mean: {', '.join(scoped[:3])}?"
            raise BlobNotFoundError(f"blob {name!r} is not in the workspace.{near}") from None

    def has_blob(self, name: str) -> bool:
        return name in self._blobs

    def blobs(self) -> list[str]:
        """Names of all blobs, sorted."""
        return sorted(self._blobs)

    def remove_blob(self, name: str) -> None:
        self._blobs.pop(name, None)

    def reset(self) -> None:
        """Drops every blob and net."""
        self._blobs.clear()
        self._nets.clear()

    # -- nets ----------------------------------------------------------------------------

    def create_net(self, net: Any, overwrite: bool = False) -> str:
        """Instantiates `net` (Net or NetDef): kernels resolved, arguments parsed, checked.

        Returns:
            The net's name, for run_net.
        """
        proto = _netdef(net)
        if proto.name in self._nets and not overwrite:
            raise SchemaError(
                f"net {proto.name!r} already exists in this workspace; "
                "pass overwrite=True to replace it"
            )
        self._nets[proto.name] = create_runtime(self._placed(proto))
        return proto.name

    def _placed(self, proto: NetDef) -> NetDef:
        """`proto` itself when every op runs on the CPU; else the placement pass's net,
        with copies where a blob crosses devices (blobs already here stay where they are;
        blobs fed later are taken to come from the host)."""
        from netbrew.executor.placement import plan_placement, wants_gpu

        if not wants_gpu(proto):
            return proto
        where = {n: ("cuda:0" if hasattr(v, "gpudata") else "cpu") for n, v in self._blobs.items()}
        return plan_placement(proto, locations=where).net

    def run_net(self, name: Any, num_iter: int = 1, profile: bool = False) -> Profile | None:
        """Runs a created net `num_iter` times. Accepts the name, a Net or a NetDef.

        Args:
            name: the net's name, or the Net or NetDef.
            num_iter: how many times to run it.
            profile: time every op; prints the per-op-type table and returns it.

        Returns:
            With profile=True, the Profile (rows per op type, calls, ms, share, GFLOP/s);
            else None.
        """
        runtime = self.get_net(name)
        if not profile:
            for _ in range(num_iter):
                runtime.run(self._blobs)
            return None
        result = Profile()
        for _ in range(num_iter):
            runtime.run(self._blobs, profile=result)
            result.iterations += 1
        print(result.table())
        return result

    def get_net(self, name: Any) -> Any:
        """The created runtime of a net (by name, Net or NetDef)."""
        key = name if isinstance(name, str) else _netdef(name).name
        if key not in self._nets:
            raise SchemaError(
                f"net {key!r} has not been created.{suggest(key, self._nets)} "
                "Call create_net first."
            )
        return self._nets[key]

    def run_net_once(self, net: Any) -> None:
        """Creates, runs and forgets `net`."""
        create_runtime(self._placed(_netdef(net))).run(self._blobs)

    def run_operator_once(self, op: OperatorDef) -> None:
        """Runs a single OperatorDef against the workspace's blobs."""
        compile_op(0, op).run(self._blobs)

    def nets(self) -> list[str]:
        return sorted(self._nets)
