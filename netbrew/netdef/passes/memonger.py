"""Blob reuse for inference memory (Caffe2's memonger, `optimize_inference_for_dag`).

The executor keeps every blob a net writes until the run ends. Renaming intermediate
blobs so that a later op writes over a blob whose last reader has run drops the old
array's last reference there, so NumPy frees it during the run rather than after it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from netbrew.netdef.passes._graph import copy_net, is_opaque, reads, reads_scope
from netbrew.proto.netbrew_pb2 import NetDef, OperatorDef

IN_ORDER = frozenset({"", "simple", "async_simple", "prof_dag"})
"""Net types whose runtime runs the ops one after another."""


@dataclass
class _Version:
    """One write of a blob: its writer, its readers and the name it gets."""

    name: str
    writer: int
    readers: list[int] = field(default_factory=list)
    new_name: str = ""


def _protected(net: NetDef, keep: Iterable[str]) -> set[str]:
    """Names never renamed: the net's inputs and outputs, `keep`, blobs read before any
    write (parameters), control inputs, and every blob an opaque op touches."""
    names = {*net.external_input, *net.external_output, *keep, ""}
    written: set[str] = set()
    for op in net.op:
        names.update(b for b in op.input if b not in written)
        names.update(op.control_input)
        if is_opaque(op):
            names.update(op.input)
            names.update(op.output)
        written.update(op.output)
    return names


def _versions(net: NetDef, protected: set[str]):
    """Each renameable write of a blob as a _Version, and per op the version each input
    and output slot holds (None for protected blobs).

    Returns:
        (reads, writes): reads[i][k] is the version input k of op i reads, writes[i][k]
        the version output k of op i writes.
    """
    current: dict[str, _Version] = {}
    slot_reads: list[list[_Version | None]] = []
    slot_writes: list[list[_Version | None]] = []
    for i, op in enumerate(net.op):
        mine = [current.get(b) for b in op.input]
        for v in mine:
            if v is not None and (not v.readers or v.readers[-1] != i):
                v.readers.append(i)
        slot_reads.append(mine)
        written = [None if b in protected else _Version(b, i) for b in op.output]
        current.update((v.name, v) for v in written if v is not None)
        slot_writes.append(written)
    return slot_reads, slot_writes


def _ancestors(net: NetDef) -> list[int]:
    """For each op, a bit set of the ops that run before it in the `dag` runtime: the
    transitive closure of its read-after-write, write-after-read, write-after-write and
    control-input dependencies (as netbrew.executor.dag), barriers included."""
    last_writer: dict[str, int] = {}
    readers: dict[str, list[int]] = {}
    ancestors: list[int] = []
    barrier = -1
    for i, op in enumerate(net.op):
        if is_opaque(op):  # a barrier: waits for every earlier op
            deps = set(range(i))
            barrier = i
        else:
            outs = [b for b in op.output if b]
            deps = {last_writer[b] for b in [*reads(op), *outs] if b in last_writer}
            for b in outs:
                deps.update(readers.get(b, ()))
            deps.update([barrier] if barrier >= 0 else [])
        deps.discard(i)
        bits = 0
        for d in deps:
            bits |= ancestors[d] | (1 << d)
        ancestors.append(bits)
        for b in filter(None, op.input):
            readers.setdefault(b, []).append(i)
        for b in filter(None, op.output):
            last_writer[b] = i
            readers[b] = []
    return ancestors


class _Names:
    """Hands out blob names: a dead blob's name is reused when its readers all run
    before the op that would write it; otherwise the original or a fresh name."""

    def __init__(self, net: NetDef, in_order: bool) -> None:
        self.ancestors = None if in_order else _ancestors(net)
        self.free: list[tuple[str, int]] = []  # (name, bit set of its last version's users)
        self.live: set[str] = set()
        self.all = {b for op in net.op for b in [*op.input, *op.output]}
        self.all |= {*net.external_input, *net.external_output}

    def take(self, i: int, original: str) -> str:
        """A name for a blob op i writes (originally `original`)."""
        before = (1 << i) - 1 if self.ancestors is None else self.ancestors[i]
        for k in range(len(self.free) - 1, -1, -1):  # the most recently freed first
            name, users = self.free[k]
            if users & ~before == 0:
                del self.free[k]
                return self._hold(name)
        busy = self.live | {name for name, _ in self.free}
        name, n = original, 0
        while name in busy or (n and name in self.all):
            n += 1
            name = f"{original}__m{n}"
        return self._hold(name)

    def _hold(self, name: str) -> str:
        self.live.add(name)
        self.all.add(name)
        return name

    def release(self, version: _Version) -> None:
        users = 1 << version.writer
        for r in version.readers:
            users |= 1 << r
        self.live.discard(version.new_name)
        self.free.append((version.new_name, users))


def share_blobs(net: NetDef, *, keep: Iterable[str] = ()) -> NetDef:
    """Renames intermediate blobs so that dead ones are written over by later ops.

    A blob written in the net and not protected (external inputs and outputs, `keep`,
    blobs read before any write such as parameters, control inputs, blobs of ops that
    refer to blobs by name) gets, when its writer runs, the name of a blob whose last
    reader has already run: in order for a `simple` net, and among the writer's
    dependencies for a `dag` net, so that the reuse adds no ordering the DAG lacked.
    An op written in place keeps doing so. Nets holding If, Loop or Scan (whose
    subgraphs read outer blobs by name) or unknown ops are returned unchanged.

    Args:
        net: the NetDef; not modified.
        keep: more blob names to leave alone (e.g. blobs fetched after the run, or the
            workspace's parameters).

    Returns:
        A new NetDef computing the same external outputs.
    """
    if any(reads_scope(op) for op in net.op):
        return copy_net(net, net.op)
    slot_reads, slot_writes = _versions(net, _protected(net, keep))
    last_use: dict[int, list[_Version]] = {}
    for written in slot_writes:
        for v in filter(None, written):
            last_use.setdefault(max(v.readers, default=v.writer), []).append(v)
    names = _Names(net, in_order=net.type in IN_ORDER)
    for i in range(len(net.op)):
        inherited = set()
        for v in filter(None, slot_writes[i]):
            src = next((u for u in slot_reads[i] if u is not None and u.name == v.name), None)
            if src is not None:  # written in place: keeps doing so, under its input's name
                v.new_name = src.new_name
                inherited.add(id(src))
            else:
                v.new_name = names.take(i, v.name)
        for v in last_use.get(i, ()):
            if id(v) not in inherited:
                names.release(v)
    return copy_net(net, map(_renamed, net.op, slot_reads, slot_writes))


def _renamed(op: OperatorDef, got: list, put: list) -> OperatorDef:
    """`op` reading the versions `got` and writing `put` under their new names."""
    new = OperatorDef()
    new.CopyFrom(op)
    for k, v in enumerate(got):
        if v is not None:
            new.input[k] = v.new_name
    for k, v in enumerate(put):
        if v is not None:
            new.output[k] = v.new_name
    return new
