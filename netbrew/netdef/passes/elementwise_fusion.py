"""Elementwise fusion: a connected group of elementwise ops whose intermediate results
only the group reads becomes one FusedElementwise op, a chain or a DAG with several
outputs (an LSTM cell's gate math: four activations, c' = f * c + i * g and
h' = o * tanh(c'), with c' and h' both wanted). The pass sees into the subnets of If,
Loop and Scan, so a scripted loop body (netbrew.script) is fused too."""

from __future__ import annotations

from collections import defaultdict

from netbrew.netdef.passes._graph import copy_net, op_schema, subnets
from netbrew.proto.netbrew_pb2 import DeviceOption, NetDef, OperatorDef


def _subnet_reads(net: NetDef) -> set[str]:
    """Every blob a subnet's ops (and theirs, deeply) read besides its formal inputs: the
    enclosing scope's blobs it may read (a superset: some are its own)."""
    names: set[str] = set()
    for op in net.op:
        names.update(b for b in [*op.input, *op.control_input] if b)
        for sub in subnets(op):
            names |= _subnet_reads(sub)
    return names - set(net.external_input)


class _DefUse:
    """Who wrote the version of each blob an op reads, and who reads each op's output.

    An op with subnets reads what they read from its scope; an op that refers to blobs by
    name beyond its inputs (Save, collectives) or of unknown type reads every blob written
    before it, so no result before it may go unwritten."""

    def __init__(self, net: NetDef) -> None:
        last: dict[str, int] = {}
        self.src: list[list[int | None]] = []  # per op, per input: its writer (None: outside)
        self.readers: dict[tuple[int, str], list[int]] = defaultdict(list)
        self.writes: dict[str, list[int]] = defaultdict(list)  # name -> ops writing it
        for i, op in enumerate(net.op):
            self.src.append([last.get(b) if b else None for b in op.input])
            spec = op_schema(op.type)
            if spec is None or (spec.wants_names and not spec.wants_scope):
                read = set(last)
            else:
                read = {b for b in [*op.input, *op.control_input] if b}
                for sub in subnets(op):
                    read |= _subnet_reads(sub)
            for b in read:
                if b in last:
                    self.readers[(last[b], b)].append(i)
            for b in op.output:
                if b:
                    last[b] = i
                    self.writes[b].append(i)
        self.live_out = {last[n] for n in net.external_output if n in last}

    def written_between(self, name: str, after: int, upto: int, skip: set[int]) -> bool:
        """Whether an op outside `skip` in positions (after, upto] writes `name`."""
        return any(after < o <= upto and o not in skip for o in self.writes.get(name, ()))


def _outputs(net: NetDef, du: _DefUse, group: list[int]) -> list[int] | None:
    """The members of `group` (net positions, ascending) whose results the fused op must
    write, or None when it cannot take the place of the last member: a result read
    outside the group before that place, a blob the group reads from outside or one of
    its outputs written by another op in between, or two outputs written in place."""
    members, place = set(group), group[-1]
    outputs = []
    for s in group:
        op = net.op[s]
        for b, w in zip(op.input, du.src[s]):
            if b and w not in members and du.written_between(b, s, place, members):
                return None
        name = op.output[0]
        outside = [r for r in du.readers.get((s, name), []) if r not in members]
        if any(r < place for r in outside):
            return None
        if outside or s in du.live_out:
            if du.written_between(name, s, place - 1, members):
                return None
            outputs.append(s)
    inputs = {b for s in group for b, w in zip(net.op[s].input, du.src[s]) if w not in members}
    if sum(net.op[s].output[0] in inputs for s in outputs) > 1:
        return None  # FusedElementwise writes only output 0 over an input ({0: 0})
    return outputs


def _groups(net: NetDef, du: _DefUse, fusible, device: DeviceOption) -> list[list[int]]:
    """Groups of fusible CPU ops, grown in net order: an op joins the groups whose results
    it reads (all of them, else the largest one that stays valid), else starts one."""
    group_of: dict[int, int] = {}
    groups: dict[int, list[int]] = {}
    for j, op in enumerate(net.op):
        if not (fusible(op) and _on_cpu(op, device)):
            continue
        # Clip's bounds do not link: they stay inputs, so the numba loop reads one value
        linked = {
            group_of[w]
            for k, w in enumerate(du.src[j])
            if w in group_of and not (op.type == "Clip" and k)
        }
        tries = [sorted(linked)] + sorted(([g] for g in linked), key=lambda g: -len(groups[g[0]]))
        for ids in tries if linked else []:
            group = sorted({j, *(s for g in ids for s in groups[g])})
            if _outputs(net, du, group) is not None:
                for g in ids:
                    del groups[g]
                groups[j] = group
                group_of.update(dict.fromkeys(group, j))
                break
        else:
            groups[j] = [j]
            group_of[j] = j
    return [g for g in groups.values() if len(g) > 1]


def _on_cpu(op: OperatorDef, device: DeviceOption) -> bool:
    option = op.device_option if op.HasField("device_option") else device
    return option.device_type == 0  # FusedElementwise has a CPU kernel only


def fuse_elementwise(net: NetDef, device: DeviceOption | None = None) -> NetDef:
    """Rewrites groups such as `t = Add(x, b); u = Relu(t); y = Mul(u, s)` as
    `y = FusedElementwise(x, b, s)`, and `c2 = Add(Mul(f, c), Mul(i, g)); h2 = Mul(o,
    Tanh(c2))` as `c2, h2 = FusedElementwise(f, c, i, g, o, outputs=...)`.

    A group is two or more ops of netbrew.operators.fused_elementwise.STEP_SLOTS (Add,
    Sub, Mul, Div, Relu, Sigmoid, Tanh, Exp, Clip, LeakyRelu, ...) on the CPU, connected
    by the results they read from each other (Clip's bounds aside). The fused op takes the
    last op's place and writes the results that are net outputs or read by ops after it;
    the other intermediate blobs are no longer written. So a group is refused where an op
    outside it reads one of its results before that place, or writes a blob the group
    reads (or one of its outputs) in between. The subnets of If, Loop and Scan are fused
    the same way, their external outputs kept written. Its numbers equal the unfused ops',
    and so does its gradient (fused_elementwise_grad), though the pass is meant for
    inference.

    Args:
        net: the NetDef; not modified.
        device: the device of ops without their own device option (default: the net's).

    Returns:
        A new NetDef.
    """
    from netbrew.operators.fused_elementwise import fuse_steps, fusible  # late: see _graph

    device = net.device_option if net.HasField("device_option") or device is None else device
    du = _DefUse(net)
    external = {*net.external_input, *net.external_output}
    fused: dict[int, OperatorDef] = {}
    taken: set[int] = set()
    for group in _groups(net, du, fusible, device):
        outputs = _outputs(net, du, group)
        members = {s: k for k, s in enumerate(group)}
        steps = [net.op[s] for s in group]
        reads = [[members.get(w) for w in du.src[s]] for s in group]
        # intermediate names written once are recorded, so export writes them again
        blobs = [
            ""
            if s in outputs or len(du.writes[op.output[0]]) != 1 or op.output[0] in external
            else op.output[0]
            for s, op in zip(group, steps)
        ]
        while blobs and not blobs[-1]:
            blobs.pop()
        fused[group[-1]] = fuse_steps(steps, reads, [members[s] for s in outputs], blobs)
        taken.update(group)
    ops = []
    for i, op in enumerate(net.op):
        if i in fused:
            ops.append(fused[i])
        elif i not in taken:
            ops.append(_with_fusedsubnets(op, device))
    return copy_net(net, ops)


def _with_fusedsubnets(op: OperatorDef, device: DeviceOption) -> OperatorDef:
    """op, with fuse_elementwise applied to the subnets it holds (If, Loop, Scan)."""
    if not any(arg.nets or arg.HasField("n") for arg in op.arg):
        return op
    inner = op.device_option if op.HasField("device_option") else device
    out = OperatorDef()
    out.CopyFrom(op)
    for arg in out.arg:
        for sub in arg.nets:
            sub.CopyFrom(fuse_elementwise(sub, inner))
        if arg.HasField("n"):
            arg.n.CopyFrom(fuse_elementwise(arg.n, inner))
    return out
